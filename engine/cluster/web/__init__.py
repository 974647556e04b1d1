"""The dashboard: a read-only subset of Flink's REST API and a web page (served by the JobManager)."""
