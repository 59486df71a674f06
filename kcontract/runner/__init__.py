"""The worker side of a run: the job a worker receives, the pool of reused workers that run jobs (the longest
first, within the device memory they share), and a job through its gates in a worker."""
