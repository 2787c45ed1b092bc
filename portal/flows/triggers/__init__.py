"""A flow's data triggers and freshness goals: what starts a flow besides its cron schedule and
how fresh its destination datasets must be. The catalog's side only (models, the one save path,
the page, its form and the API); orchestration.control.triggers reacts to them and
monitoring.freshness reports a missed goal."""
