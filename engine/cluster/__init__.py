"""The cluster: Dispatcher and client, JobMaster, ResourceManager and SlotManager, TaskExecutors, heartbeats, checkpoint driving (Trio)."""
