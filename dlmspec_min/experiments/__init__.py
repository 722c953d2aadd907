"""Each claim's measurement as a function: the book's notebooks call these.

One module per page of the book (``models`` for the models page, ``c1`` ... for
the claims, ``trajectory`` for the related method). Each exposes one ``measure``
function that takes loaded models and the page's parameters and returns a small
result object: ``values`` (the claim values the page glues, keyed by their
glue names, plain scalars with their intervals) and the tables and arrays the
page draws. Verdicts stay with the page (``plumbing.claims.verdict`` on the
recorded values), so this folder imports nothing from ``plumbing``.

    common                   loading the page's models; the Measurement result
    models                   the models page: corpus, accuracy ladder, caches, judge
    c1_easy_first            C1: the decode order of content and function words
    c2_anchor_acceptance     C2: alpha_SID of the drafts at the content anchors
    c3_win_condition         C3: SSLD's acceptance against the accelerators' bar
    c4_cluster_verification  C4: token- and cluster-level acceptance
    c5_bounded_quality       C5: speed inside a quality bound, by the judge
    c6_conditional           C6: drafts given the prompt
    c7_strong_model          C7: a larger target, where content is more determined
    c8_information           C8: what the decoded tokens carry
    trajectory               trajectory speculation on Fast-dLLM (the related method)
"""
