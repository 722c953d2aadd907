"""Sphinx extension: the pages computed from what the build executed.

- ``{claims-dashboard}``: a compact matrix (claim x world: the verdict and one key
  figure each, each world's regime in its column head), then one row per claim
  with its headline values and verdict;
- ``{claims-summary}``: the landing page's verdict counts, a line per claim and
  the regime (this build's strongest accelerator against the paper's);
- ``{provenance-table}``: the fingerprint and commit each notebook ran under,
  beside the build's (``dlmspec_min.plumbing.provenance``);
- ``{claim-worlds} C2``: on a claim's page, that claim in every world (regime,
  key figure, verdict), a world not measured with the reason;
- ``{check-worlds} trajectory``: a check's figures, rules and targets in every
  world (the trajectory page's);
- ``{regime-crossing}``: the landing page's sentence on where semantic drafting
  falls below the bar, from the regime page's glued values.

Another world's values come from the page's world run
(``dlmspec_min.plumbing.worldruns``), read under the world's suffix.

Each directive leaves a placeholder; after every document has been read (and
so every notebook executed), ``doctree-resolved`` replaces it with HTML
computed from book/claims.yml and the glue data the build just wrote. The pages
holding them are re-written on every build so they never show stale values; a
verdict whose notebook ran under another fingerprint shows as *stale*.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

from dlmspec_min import catalogue
from dlmspec_min.measures import stats
from dlmspec_min.paths import REPO_ROOT
from dlmspec_min.plumbing import claims, figures, provenance, worldruns

CSS = claims.VERDICT_COLOURS


def _regime(rows, world: str) -> str:
    """The column head's regime: tokens per forward of the world's strongest
    accelerator (C3's tau_acc), or what is missing."""
    c3 = next((r for r in rows if r["id"] == "C3"), None)
    tau = claims.world_values((c3 or {}).get("values") or {}, world).get("c3_tau_acc")
    if not isinstance(tau, (int, float)):
        return "regime not measured"
    return (f"tau_acc {tau:.3g} tokens per forward, alpha* {1 - 1 / tau:.2f} "
            "(on C3's questions)")


def _matrix(rows, registry: dict, docname: str) -> str:
    """Claim x world at a glance: each cell the verdict and the key figure."""
    up = "../" * docname.count("/")
    worlds = list(claims.WORLD_SUFFIXES)
    out = ['<table class="table claims-matrix"><thead><tr><th>claim</th>']
    out += [f'<th data-world="{w}">{html.escape(f"{w} ({catalogue.get(w).title})")}<br>'
            f'<small>{html.escape(_regime(rows, w))}</small></th>' for w in worlds]
    out.append("</tr></thead><tbody>")
    measured = dict.fromkeys(worlds, False)  # a world with any verdict
    for r in rows:
        link = up + str(Path(r["notebook"]).with_suffix(".html"))
        cells = claims.world_cells(r, registry)
        for w in worlds:
            measured[w] |= cells[w]["verdict"] != claims.NOT_MEASURED
        out.append(f'<tr><td><a href="{link}">{r["id"]}</a></td>')
        for w in worlds:
            c = cells[w]
            fig = ("" if c["value"] is None else
                   f'<br><small>{html.escape(c["label"])}: '
                   f'{html.escape(claims.format_value(c["value"]))}</small>')
            if claims.size_words(c):
                fig += f"<br><small>{html.escape(claims.size_words(c))}</small>"
            out.append(f'<td class="world-verdict" data-claim="{r["id"]}" '
                       f'data-world="{w}">{_verdict_span(c["verdict"])}{fig}</td>')
        out.append("</tr>")
    out.append("</tbody></table>")
    for w in worlds:  # a world with nothing measured: why
        if not measured[w]:
            note = _not_measured(w, f"{w}: not measured by this build")
            out.append(f'<p class="world-missing" data-world="{w}"><small>'
                       f"{html.escape(note)}</small></p>")
    return "\n".join(out)


def _not_measured(world: str, text: str) -> str:
    """``text``, then the world's models this build lacks, if any."""
    missing = _models_missing(world)
    return text + (f"; the world's models missing: {missing}" if missing else "")


def _models_missing(world: str) -> str:
    """Which of ``world``'s default models (target, draft, strong) this build
    lacks, in words, or '' when all are trained."""
    w = catalogue.get(world)
    return worldruns.models_missing(tuple(w.role(r) for r in catalogue.ROLES))


def _claim_worlds(rows, registry: dict, claim_id: str) -> str:
    """One claim in every world: the regime it was judged against (its own
    tau_acc and alpha* where it measures them, else C3's), its key figure and
    its verdict, the same rule on each world's values; a world the build did
    not measure says so and why."""
    row = next(r for r in rows if r["id"] == claim_id)
    c3 = next((r for r in rows if r["id"] == "C3"), None)
    cells = claims.world_cells(row, registry)
    tau_key = f"{claim_id.lower()}_tau_acc"
    out = [f'<table class="table claim-worlds" data-claim="{claim_id}"><thead><tr>'
           "<th>world</th><th>regime (tau_acc, alpha*)</th><th>key figure</th>"
           "<th>verdict</th></tr></thead><tbody>"]
    for w, c in cells.items():
        own = claims.world_values(row.get("values") or {}, w).get(tau_key)
        if isinstance(own, (int, float)) and own > 0:
            regime = (f"tau_acc {own:.3g} tokens per forward, alpha* "
                      f"{1 - 1 / own:.2f} (on this page's questions)")
        else:  # the world's regime as C3 measured it
            regime = _regime([c3] if c3 else [], w)
        figure = ("&mdash;" if c["value"] is None else
                  f"{html.escape(c['label'])}: <b>"
                  f"{html.escape(claims.format_value(c['value']))}</b>")
        if claims.size_words(c):
            figure += f"<br><small>{html.escape(claims.size_words(c))}</small>"
        why = ("<br><small>" + html.escape(_not_measured(
            w, "this build did not measure it here")) + "</small>"
            if c["verdict"] == claims.NOT_MEASURED else "")
        title = html.escape(f"{w} ({catalogue.get(w).title})")
        out.append(f'<tr data-world="{w}"><td>{title}</td>'
                   f"<td>{html.escape(regime)}</td><td>{figure}</td>"
                   f'<td class="claim-world-verdict" data-world="{w}">'
                   f"{_verdict_span(c['verdict'])}{why}</td></tr>")
    out.append("</tbody></table>")
    out += _sizes_notes(registry["claims"][claim_id]["notebook"], cells)
    out += _power_notes(row, registry, claim_id, cells)
    return "\n".join(out)


def _interval(side) -> str:
    value, low, high = side
    return stats.with_interval(value, low, high)


def _power_notes(row, registry: dict, claim_id: str, worlds) -> list[str]:
    """Under a page's table of worlds, per measured world: the two intervals the
    verdict's rule compares (one of its conditions: C3's end-to-end ratio,
    C5's repetition, C6's AUC and C7's determinedness are others), whether
    they separate, and the samples at which they would be expected to, from
    this run's gap (``claims.power_reading``; the plan is the registry's
    ``power:``)."""
    spec = registry.get("power", {}).get("claims", {}).get(claim_id)
    if spec is None:
        return []
    level = registry["power"]["level"]
    out = []
    for w in worlds:
        values = claims.world_values(row.get("values") or {}, w)
        p = _world_reading(claim_id, values, w, registry)
        if p is None:
            continue
        ran = ", ".join(f"{k} {v}" for k, v in p["sizes"].items())
        if not all(math.isfinite(x) for x in (*p["a"], *p["b"])):
            verdict = "an interval is not finite here: no size can be computed"
        elif p["separated"]:
            verdict = "they do not overlap: this comparison is decided"
        elif p["a"][0] == p["b"][0]:
            verdict = "they overlap and their estimates coincide: no size decides"
        else:
            verdict = _sizes_words(p, ran, level)
        la, lb = p["labels"]
        seq = values.get(f"{claim_id.lower()}_seq_note")
        seq = f" Size: {seq}." if isinstance(seq, str) and seq else ""
        out.append(f'<p class="claim-power" data-world="{w}"><small>'
                   f"{html.escape(w)}: the rule compares {html.escape(la)} "
                   f"{html.escape(_interval(p['a']))} with {html.escape(lb)} "
                   f"{html.escape(_interval(p['b']))}; {html.escape(verdict)}."
                   f"{html.escape(seq)}</small></p>")
    return out


def _world_reading(claim_id: str, values: dict, world: str, registry: dict):
    """``claims.power_reading`` of a claim in one world, at the sizes its run
    measured (where a sequential run stopped, its stopping size)."""
    spec = registry.get("power", {}).get("claims", {}).get(claim_id)
    if spec is None:
        return None
    notebook = registry["claims"][claim_id]["notebook"]
    sizes = worldruns.run_sizes(REPO_ROOT / notebook, world, spec["size"])
    stop = values.get(f"{claim_id.lower()}_seq_n")
    if isinstance(stop, int) and not isinstance(stop, bool) and stop > 0:
        sizes = [stop] * len(spec["size"])  # where a sequential run stopped
    return claims.power_reading(claim_id, values, sizes, registry)


def _undecided_sentence(rows, registry: dict, cells: dict) -> str:
    """The landing page's line on the inconclusive verdicts that more samples
    alone cannot decide, per world (the spread between alpha_SID's codebooks
    alone is too wide for the gap), and what would decide each
    (``_world_reading``)."""
    out = []
    for w in claims.WORLD_SUFFIXES:
        said = []
        for r in rows:
            cid = r["id"]
            if cells[cid][w]["verdict"] != claims.INCONCLUSIVE:
                continue
            p = _world_reading(cid, claims.world_values(r.get("values") or {}, w),
                               w, registry)
            if p is None or not p.get("codebooks") or p["needed"] is not None:
                continue
            n = next(iter(p["sizes"].values()))
            what = (f"about {p['codebooks_needed']} codebooks on its {n} samples"
                    if p["codebooks_needed"] is not None else
                    f"about {p['both'][0]} samples with {p['both'][1]} codebooks"
                    if p["both"] else None)
            if what:
                said.append((cid, what))
        if said:
            ids, whats = [c for c, _ in said], [f"{x} for {c}" for c, x in said]
            verb = "stays" if len(ids) == 1 else "stay"
            out.append(
                f'<p class="finding" data-world="{w}">In '
                f"{html.escape(catalogue.get(w).title)}, {_and(ids)} {verb} "
                "inconclusive: the spread between alpha_SID's codebooks alone is "
                "too wide for the gap to its bar, and more samples leave it as it "
                f"is; deciding would take {html.escape(_and(whats))}, at "
                f"{registry['power']['level']:.0%} power if the gaps seen here "
                "are the true ones.</p>")
    return "".join(out)


def _and(items: list[str]) -> str:
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _sizes_words(p: dict, ran: str, level: float) -> str:
    """What would separate two overlapping intervals (``claims.power_reading``):
    samples, and where one side is a mean over codebooks, samples at the run's
    codebooks and codebooks at the run's samples."""
    power = f"{level:.0%} power, if the gap seen here is the true one"
    books = p.get("codebooks")
    if not books:
        return (f"they overlap; about {p['needed']} samples (this run: {ran}) would "
                f"be expected to separate them ({power})")
    samples = (f"about {p['needed']} samples (this run: {ran}) would be expected "
               f"to separate them at its {books} codebooks"
               if p["needed"] is not None else
               f"at this run's {books} codebooks no number of samples would be "
               "expected to separate them (the spread between its codebooks alone "
               "is too wide for the gap, and more samples leave it as it is)")
    more = (f"about {p['codebooks_needed']} codebooks would on this run's samples"
            if p.get("codebooks_needed") is not None else
            "no number of codebooks would on this run's samples")
    if p.get("both"):
        more += (f"; together, about {p['both'][0]} samples with "
                 f"{p['both'][1]} codebooks would")
    return f"they overlap; {samples}; {more} ({power})"


def _sizes_notes(notebook: str, worlds) -> list[str]:
    """Under a page's table of worlds: each world the book runs at reduced sizes,
    with the full sizes and how to run them (``worldruns.sizes_note``)."""
    out = []
    for w in worlds:
        if w == catalogue.DEFAULT:
            continue
        note = worldruns.sizes_note(notebook, w)
        if note:
            out.append(f'<p class="world-sizes" data-world="{w}"><small>'
                       f"{html.escape(note)}</small></p>")
    return out


def _check_worlds(registry: dict, check_id: str, executed: Path,
                  fingerprint: str) -> str:
    """A check (``checks:`` in claims.yml, e.g. the trajectory page's) in every
    world: its figures, and its rules and targets evaluated on each world's
    values (the prose world's are the check's own, another world's those under
    ``worlds: <world>:``); a world the build did not measure says why."""
    check = registry["checks"][check_id]
    path = claims.executed_path(check["notebook"], executed)
    values = (claims.read_glued(path) if path.with_suffix(".glue.json").exists()
              or path.exists() else {})
    stale = set(claims.add_world_runs(path, values, fingerprint))
    if values and values.get(claims.FINGERPRINT_KEY) != fingerprint:
        stale.add(catalogue.DEFAULT)
    out = [f'<table class="table check-worlds" data-check="{check_id}"><thead><tr>'
           "<th>world</th><th>figures</th><th>rules (a test requires them)</th>"
           "<th>targets (reported)</th></tr></thead><tbody>"]
    for w in claims.WORLD_SUFFIXES:
        wv = claims.world_values(values, w)
        own = (check if w == catalogue.DEFAULT
               else (check.get("worlds") or {}).get(w) or {})
        title = html.escape(f"{w} ({catalogue.get(w).title})")
        if not wv:
            why = html.escape(_not_measured(w, "not measured by this build"))
            out.append(f'<tr data-world="{w}"><td>{title}</td><td colspan="3">'
                       f"{_verdict_span(claims.NOT_MEASURED)}<br><small>{why}"
                       "</small></td></tr>")
            continue
        shown = {k: "<i>not measured</i>" if wv.get(k) is None else
                 f"<b>{html.escape(claims.format_value(wv[k]))}</b>"
                 for k in check.get("world_figures") or {}}
        figures = "<br>".join(f"{html.escape(label)}: {shown[k]}" for k, label in
                              (check.get("world_figures") or {}).items())
        cells = []
        for kind in ("rules", "targets"):
            items = []
            for name, rule in (own.get(kind) or {}).items():
                try:
                    met = "met" if claims.evaluate(rule, wv) else "not met"
                except KeyError:
                    met = "not recorded"
                words = (check.get("rule_words") or {}).get(name,
                                                            name.replace("_", " "))
                items.append(f'<span class="check-{met.replace(" ", "-")}">'
                             f"{html.escape(words)}: {met}</span>")
            cells.append("<br>".join(items) or "&mdash;")
        note = (f"<br>{_verdict_span(claims.STALE)}" if w in stale else "")
        out.append(f'<tr data-world="{w}"><td>{title}{note}</td><td>{figures}</td>'
                   f"<td>{cells[0]}</td><td>{cells[1]}</td></tr>")
    out.append("</tbody></table>")
    out += _sizes_notes(check["notebook"], claims.WORLD_SUFFIXES)
    return "\n".join(out)


class dashboard_placeholder(nodes.General, nodes.Element):
    """Replaced by the HTML of ``kind`` once every notebook has executed."""


def _directive(kind: str):
    class Computed(SphinxDirective):
        optional_arguments = 1  # claim-worlds: the claim's id

        def run(self):
            self.env.note_dependency(str(claims.REGISTRY))
            self.env.metadata[self.env.docname]["claims_dashboard"] = True
            node = dashboard_placeholder()
            node["kind"] = kind
            node["claim"] = self.arguments[0] if self.arguments else None
            group = {"claim-worlds": "claims", "check-worlds": "checks",
                     "decoder-rates": "checks"}.get(kind)
            if group and node["claim"] not in claims.load_registry()[group]:
                raise self.error(f"{kind} needs one of the {group} of "
                                 f"book/claims.yml, got {node['claim']!r}")
            return [node]

    return Computed


def _table(rows, registry: dict, docname: str) -> str:
    """One row per claim: statement, the paper's figure, this build's key figures
    (the claim's ``finding``), what the verdict rests on in each world (the
    comparisons of ``claims.evidence``, beside the paper's figure of the same
    quantity) and the verdict."""
    up = "../" * docname.count("/")
    out = [
        '<table class="table claims-dashboard">',
        "<thead><tr><th>claim</th><th>statement</th><th>paper</th>"
        "<th>this build (Brown prose)</th><th>what the verdict rests on</th>"
        "<th>verdict</th><th>on piece-level anchors</th>"
        "</tr></thead><tbody>",
    ]
    for r in rows:
        link = up + str(Path(r["notebook"]).with_suffix(".html"))
        if r["measured"]:
            labels = registry["claims"][r["id"]]["keys"]
            measured = "<br>".join(
                f"{html.escape(labels[k]['label'])}: <b>{claims.format_value(v)}</b>"
                for k, v in r["finding"].items())
            cid = f'<a href="{link}">{r["id"]}</a>'
        else:
            measured, cid = "&mdash;", r["id"]
        color = CSS.get(r["verdict"], "#000")
        out.append(
            f"<tr><td>{cid}</td><td>{html.escape(r['statement'])}</td>"
            f"<td>{html.escape(str(r['paper']))}</td><td>{measured}</td>"
            f"<td>{_evidence_cell(r, registry)}</td>"
            f'<td class="verdict" data-claim="{r["id"]}" '
            f'style="color:{color};font-weight:bold">'
            f"{r['verdict']}</td>{_secondary_cell(r)}</tr>"
        )
    out.append("</tbody></table>")
    return "\n".join(out)


def _evidence_cell(r, registry: dict) -> str:
    """Per world, each comparison the verdict rests on: the build's figure
    against what the rule holds it against, whether the intervals separate,
    and the paper's figure of the same quantity."""
    values = r.get("values") or {}
    if not values:
        return "&mdash;"
    lines = []
    for w in claims.WORLD_SUFFIXES:
        for e in claims.evidence(r["id"], claims.world_values(values, w), registry):
            if not math.isfinite(e["a"][0]):
                continue
            apart = "apart" if e["separated"] else "overlapping"
            paper = (f"; paper {e['paper']:g}" if e["paper"] is not None else "")
            lines.append(f"<small>{html.escape(w)}: {html.escape(e['labels'][0])} "
                         f"<b>{html.escape(_interval(e['a']))}</b> vs "
                         f"{html.escape(e['labels'][1])} "
                         f"{html.escape(_interval(e['b']))} ({apart}{paper})</small>")
    return "<br>".join(lines) or "&mdash;"


def _rules(registry: dict) -> str:
    """The verdict rules as a reader's table: each claim's rule in words (its
    ``says``), the expressions as evaluated folded beside it."""
    out = ['<table class="table claims-rules"><thead><tr><th>claim</th>'
           "<th>the rule, in words</th></tr></thead><tbody>"]
    for cid, claim in registry["claims"].items():
        exprs = "".join(f"<li><i>{html.escape(k)}</i> if <code>{html.escape(e)}"
                        "</code></li>" for k, e in claim["rule"].items())
        otherwise = claim.get("otherwise", claims.NOT_REPLICATED)
        exprs += f"<li>otherwise <i>{html.escape(otherwise)}</i></li>"
        out.append(f'<tr data-claim="{cid}"><td>{cid}</td><td>'
                   f"{html.escape(claim.get('says', ''))}<details><summary>as "
                   f"evaluated</summary><ul>{exprs}</ul></details></td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _record() -> str:
    """The registry's dated decisions, oldest first (``claims.decisions``), a
    NaN or inf in their text said in words (``reader_text.in_words``)."""
    from reader_text import in_words

    out = ['<table class="table decision-record"><thead><tr><th>date</th>'
           "<th>where</th><th>what was decided</th></tr></thead><tbody>"]
    for d in sorted(claims.decisions(), key=lambda d: d["date"]):
        out.append(f"<tr><td>{d['date']}</td><td>{html.escape(d['where'])}</td>"
                   f"<td>{html.escape(in_words(d['text']))}</td></tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _secondary_cell(r) -> str:
    """The secondary verdict's cell (e.g. C2 on piece-level anchors): shown beside
    the headline, never replacing it; a dash for claims without one."""
    sec = r.get("secondary")
    if sec is None:
        return '<td class="secondary-verdict">&mdash;</td>'
    return (f'<td class="secondary-verdict" data-secondary-claim="{r["id"]}">'
            f"{html.escape(sec['label'])}: {_verdict_span(sec['verdict'])}</td>")


def _verdict_span(verdict: str) -> str:
    color = CSS.get(verdict, "#000")
    return f'<span style="color:{color};font-weight:bold">{html.escape(verdict)}</span>'


def _secondary_note(r) -> str:
    sec = r.get("secondary")
    if sec is None:
        return ""
    return f" ({html.escape(sec['label'])}: {_verdict_span(sec['verdict'])})"


def _summary(rows, registry: dict, docname: str) -> str:
    """Verdict counts, one line per claim and the regime, from the dashboard rows."""
    up = "../" * docname.count("/")
    kinds = [*registry["verdicts"], claims.STALE]
    counts = {k: sum(r["verdict"] == k for r in rows) for k in kinds}
    out = ['<div class="claims-summary">', "<p><b>In Brown prose</b> (the default "
           "world; the table after the list gives each world's verdicts): "]
    out.append(", ".join(f"{n} {_verdict_span(k)}" for k, n in counts.items() if n))
    out.append(f" (of {len(rows)} claims; rules and values on the "
               f'<a href="{up}book/claims.html">claims dashboard</a>).</p><ul>')
    for r in rows:
        link = up + str(Path(r["notebook"]).with_suffix(".html"))
        if r["measured"]:
            labels = registry["claims"][r["id"]]["keys"]
            found = "; ".join(f"{html.escape(labels[k]['label'])} = "
                              f"<b>{claims.format_value(v)}</b>"
                              for k, v in r["finding"].items())
        else:
            found = "not measured by this build"
        out.append(f'<li class="claim-line" data-claim="{r["id"]}">'
                   f'<a href="{link}">{r["id"]}</a>: {found} (paper: '
                   f"{html.escape(str(r['paper']))}) &rarr; "
                   f"{_verdict_span(r['verdict'])}{_secondary_note(r)}</li>")
    out.append("</ul>")
    out.append(_matrix(rows, registry, docname))  # one verdict column per world
    c3 = next((r for r in rows if r["id"] == "C3"), None)
    paper_tau = registry["checks"]["trajectory"]["paper"]["fast_dllm_tokens_per_step"]
    if c3 and c3.get("values"):
        v = c3["values"]
        tau, lo, hi = v["c3_tau_acc"], v.get("c3_tau_acc_lo"), v.get("c3_tau_acc_hi")
        interval = f" [{lo:.3g}, {hi:.3g}]" if lo is not None and hi is not None else ""
        out.append(
            f'<p class="regime"><b>The regime.</b> In Brown prose the strongest '
            f"token-space accelerator commits {tau:.3g}{interval} tokens per "
            f"forward on C3's questions (each claim page measures it on its own "
            f"questions: C2's, and C6's with prompts, are other measurements), so the "
            f"bar alpha* = 1 - 1/tau_acc is {1 - 1 / tau:.3g}; the paper's "
            f"accelerator (Fast-dLLM on LLaDA-8B) commits {paper_tau:g}, a bar of "
            f"{1 - 1 / paper_tau:.2f}.</p>")
    out.append("</div>")
    return "".join(out)


def _findings(rows, registry: dict, docname: str) -> str:
    """The landing page's first screen: per world, in a sentence, which claims
    this build replicated and which not (each world's verdicts by the same
    rules), the draft's acceptance against its bar beside the paper's, and the
    forest plot of every comparison a verdict rests on."""
    up = "../" * docname.count("/")
    cells = {r["id"]: claims.world_cells(r, registry) for r in rows}
    kinds = [*registry["verdicts"], claims.NOT_MEASURED, claims.STALE]
    out = ['<div class="claims-findings">']
    for w in claims.WORLD_SUFFIXES:
        groups = {k: [cid for cid, c in cells.items() if c[w]["verdict"] == k]
                  for k in kinds}
        said = "; ".join(
            f"{_verdict_span(k)} " + ", ".join(
                f'<a href="{up}{Path(_notebook(rows, c)).with_suffix(".html")}">{c}</a>'
                for c in ids)
            for k, ids in groups.items() if ids)
        out.append(f'<p class="finding" data-world="{w}"><b>'
                   f"{html.escape(catalogue.get(w).title)}</b>: {said}.</p>")
    out.append(_acceptance_sentence(rows, registry))
    out.append(_undecided_sentence(rows, registry, cells))
    svg = figures.forest_svg(rows, registry)
    if svg:
        out.append('<figure class="forest-plot">' + svg + "<figcaption>Every "
                   "comparison a verdict rests on, per claim and world: this "
                   "build's figure with its 95 % interval (coloured by the world's "
                   "verdict), what the claim's rule holds it against (grey diamond, "
                   "with the bar's own interval where it has one) and the paper's "
                   "figure of the same quantity where its abstract gives one (red "
                   "dashed line). Acceptance rates are on a log axis.</figcaption>"
                   "</figure>")
    out.append("</div>")
    return "".join(out)


def _notebook(rows, claim_id: str) -> str:
    return next(r["notebook"] for r in rows if r["id"] == claim_id)


def _acceptance_sentence(rows, registry: dict) -> str:
    """C2's comparison in words: the draft's exact-ID acceptance against the bar
    in each world, and the paper's figure."""
    c2 = next((r for r in rows if r["id"] == "C2" and r.get("values")), None)
    if c2 is None:
        return ""
    parts, paper = [], None
    for w in claims.WORLD_SUFFIXES:
        ev = claims.evidence("C2", claims.world_values(c2["values"], w), registry)
        if not ev or not math.isfinite(ev[0]["a"][0]):
            continue
        paper = ev[0]["paper"]
        parts.append(f"{html.escape(_interval(ev[0]['a']))} in "
                     f"{html.escape(catalogue.get(w).title)}, against a bar "
                     f"alpha* of {html.escape(_interval(ev[0]['b']))}")
    if not parts:
        return ""
    tail = (f"; the paper reports {paper:g}" if paper is not None else "")
    return ("<p class=\"finding\">A small draft hits a content anchor's exact "
            "semantic ID (alpha_SID, with its 95 % interval) at "
            + "; at ".join(parts) + f"{tail}. Drafting beats the best token-space "
            "accelerator only where acceptance exceeds the bar alpha* = 1 - "
            "1/tau_acc.</p>")


def _provenance(rows, current: str, commit: str, docname: str) -> str:
    up = "../" * docname.count("/")
    out = [f'<p class="build-fingerprint">This build: fingerprint '
           f"<code>{current}</code> at commit <code>{html.escape(commit)}</code>. A "
           "notebook whose recorded fingerprint differs is executed again by the "
           "next build; until then its verdict shows as "
           f"{_verdict_span(claims.STALE)}.</p>",
           '<table class="table provenance"><thead><tr><th>page</th>'
           "<th>fingerprint it ran under</th><th>commit it ran at</th><th>state</th>"
           "</tr></thead><tbody>"]
    for doc, fp, at, sources_current in rows:
        state = "current" if fp == current and sources_current else claims.STALE
        out.append(f'<tr><td><a href="{up}{doc}.html">{html.escape(doc)}</a></td>'
                   f"<td><code>{html.escape(str(fp))}</code></td>"
                   f"<td><code>{html.escape(str(at))}</code></td>"
                   f'<td class="state" data-doc="{html.escape(doc)}">{state}</td></tr>')
    out.append("</tbody></table>")
    return "\n".join(out)


def _provenance_rows(executed: Path):
    rows = []
    for glue in sorted(executed.rglob("*.glue.json")):
        values = claims.read_glued(glue)
        doc = str(glue.relative_to(executed)).removesuffix(".glue.json")
        rows.append((doc, values.get(provenance.FINGERPRINT_KEY),
                     values.get(provenance.COMMIT_KEY),
                     provenance.sources_current(values)))  # notebooks it ran (10)
    return rows


def _rates(registry: dict, check_id: str, executed: Path) -> str:
    """A check page's decoders' tokens per forward in every world, beside the
    papers' rates (``figures.rates_svg``)."""
    check = registry["checks"][check_id]
    path = claims.executed_path(check["notebook"], executed)
    if not (path.exists() or path.with_suffix(".glue.json").exists()):
        return "<p><i>not measured by this build</i></p>"
    from dlmspec_min.experiments.trajectory_speculation import KEYS

    values = claims.read_glued(path)
    claims.add_world_runs(path, values, None)
    svg = figures.rates_svg(values, check, {k: name for name, k in KEYS.items()})
    if not svg:
        return "<p><i>not measured by this build</i></p>"
    return ('<figure class="forest-plot decoder-rates">' + svg + "<figcaption>Tokens "
            "committed per forward by every decoder this page measured, in each "
            "world (bars; 95 % intervals where the page measured one), beside the "
            "rates the papers report on GSM8K with LLaDA-8B (lines): Fast-dLLM's "
            "threshold rule, and the trajectory paper's base and speculation. The "
            "papers' models and text differ from ours; the lines place our rates, "
            "they are not targets.</figcaption></figure>")


def _crossing(executed: Path, registry: dict) -> str:
    from dlmspec_min.experiments.regime import crossing_sentence

    page = claims.executed_path(registry["checks"]["regime"]["notebook"], executed)
    found = page.exists() or page.with_suffix(".glue.json").exists()
    glued = claims.read_glued(page) if found else None
    return f"<p>{html.escape(crossing_sentence(glued))}</p>"


def resolve(app, doctree, docname):
    placeholders = list(doctree.findall(dashboard_placeholder))
    if not placeholders:
        return
    executed = Path(app.outdir).parent / "jupyter_execute"
    current = provenance.fingerprint()
    registry = claims.load_registry()
    rows = claims.dashboard_rows(executed, registry, fingerprint=current)
    for node in placeholders:
        kind = node["kind"]
        if kind == "dashboard":
            text = ('<div class="claims-dashboard-wrap">'
                    + _matrix(rows, registry, docname) + "\n"
                    + _table(rows, registry, docname) + "</div>")
        elif kind == "summary":
            text = _summary(rows, registry, docname)
        elif kind == "rules":
            text = _rules(registry)
        elif kind == "record":
            text = _record()
        elif kind == "findings":
            text = _findings(rows, registry, docname)
        elif kind == "claim-worlds":
            text = _claim_worlds(rows, registry, node["claim"])
        elif kind == "check-worlds":
            text = _check_worlds(registry, node["claim"], executed, current)
        elif kind == "decoder-rates":
            text = _rates(registry, node["claim"], executed)
        elif kind == "regime-crossing":
            text = _crossing(executed, registry)
        else:
            text = _provenance(_provenance_rows(executed), current,
                               provenance.commit(), docname)
        node.replace_self(nodes.raw("", text, format="html"))


def always_outdated(app, env, added, changed, removed):
    return [d for d, meta in env.metadata.items() if meta.get("claims_dashboard")]


def setup(app):
    app.add_node(dashboard_placeholder)
    app.add_directive("claims-dashboard", _directive("dashboard"))
    app.add_directive("claims-summary", _directive("summary"))
    app.add_directive("claims-findings", _directive("findings"))
    app.add_directive("claims-rules", _directive("rules"))
    app.add_directive("decoder-rates", _directive("decoder-rates"))
    app.add_directive("decision-record", _directive("record"))
    app.add_directive("provenance-table", _directive("provenance"))
    app.add_directive("claim-worlds", _directive("claim-worlds"))
    app.add_directive("check-worlds", _directive("check-worlds"))
    app.add_directive("regime-crossing", _directive("regime-crossing"))
    app.connect("doctree-resolved", resolve)
    app.connect("env-get-outdated", always_outdated)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
