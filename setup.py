"""The build's one hook: the wheel carries the embedded models its README loads.

``pip install .`` and ``pip wheel .`` copy the models named in
``dlmspec_min/decoding/files.py`` (``SHIPPED_MODELS``, ``SHIPPED_FILES``; each
folder holds its own tokenizer)
from ``data/models`` into the package's ``decoding/embedded/``, where
``load_denoiser("dlmspec/small")`` finds them outside a clone. Everything else
is ``pyproject.toml``.
"""

import runpy
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
FILES = runpy.run_path(str(HERE / "dlmspec_min" / "decoding" / "files.py"))


class BuildWithModels(build_py):
    def run(self):
        super().run()
        source = HERE / "data" / "models"
        target = Path(self.build_lib) / "dlmspec_min" / "decoding" / "embedded"
        for folder in FILES["SHIPPED_MODELS"]:
            files = [source / folder / f for f in FILES["SHIPPED_FILES"]
                     if (source / folder / f).is_file()]
            if not {"config.json", "tokenizer.json"} <= {f.name for f in files}:
                raise SystemExit(f"setup.py: {source / folder} holds no model and tokenizer to ship")
            (target / folder).mkdir(parents=True, exist_ok=True)
            for f in files:
                shutil.copyfile(f, target / folder / f.name)


setup(cmdclass={"build_py": BuildWithModels})
