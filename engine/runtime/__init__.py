"""The runtime: cluster, JobMaster, ResourceManager, TaskExecutors, tasks and operators (Trio)."""
