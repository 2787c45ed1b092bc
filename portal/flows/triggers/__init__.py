"""A flow's data triggers and freshness goals: what starts a flow besides its cron schedule and
how fresh its destination datasets must be. The catalog's side only: the rows (models), a goal's
words and clock (goals), the one save path (services), the page with its form and the API;
orchestration.control.triggers reacts to them and monitoring.freshness reports a missed goal."""
