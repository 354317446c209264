"""Launching under Slurm: the sbatch script (script), one srun step per process or probe (step), the job's
nodes assigned to the topology's (allocation), Slurm's client commands (jobs), and submitting a job then
following it from outside (submit)."""
