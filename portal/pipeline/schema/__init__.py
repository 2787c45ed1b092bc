"""A dataset's schema from run to run: what changed between the recorded schema and the one read
(`drift`, shared with the portal's schema history) and what the flow's policy does about it on the
Spark side (`evolution`)."""
