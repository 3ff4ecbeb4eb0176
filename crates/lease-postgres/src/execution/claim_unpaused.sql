-- Whether no paused scope covers the row `e`, spliced as `{unpaused}` into the claim's two
-- locking selects and its horizon. The first disjunct is an uncorrelated subquery, run once
-- per statement (an InitPlan): with nothing paused (the hot path) no row pays the
-- correlated probe. The claim's snapshot sees every pause committed before it started, so a
-- pause is exact from its commit on.
((SELECT NOT EXISTS (SELECT 1 FROM {s}.paused_scopes))
    OR NOT EXISTS (
        SELECT 1 FROM {s}.paused_scopes p
        WHERE p.workflow IS NULL OR p.workflow = e.workflow
    ))
