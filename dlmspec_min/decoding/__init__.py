"""The decoding core: model, denoisers, the decoding loop, trajectory speculation.

It imports nothing from the rest of ``dlmspec_min`` (a reader who wants only
the decoder copies this folder): ``modeling`` (the embedded LLaDA-style
model), ``denoisers`` (one interface for every model), ``config``, ``steps``
and ``decode`` (the loop: its options and result, the pieces of one step, the
loop itself), ``speculate`` (trajectory speculation) and ``files`` (where the
embedded models live).
"""
