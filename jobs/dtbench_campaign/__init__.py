"""dtbench_campaign: scaling campaigns of dtbench runs, written once as a TOML spec and run on
Slurm (one job array per node count, slurm/dtbench.sbatch) or locally with mpirun.

The command line is ``dtbench-campaign`` (cli.py); the spec format is in jobs/README.md.
"""

__version__ = "0.1.0"
