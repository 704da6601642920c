#!/bin/bash
# Queue the grading array, then the merge once every array task has succeeded.
set -euo pipefail
umask 077   # sbatch passes it on (SLURM_UMASK): the tasks' logs and files are the staff's alone
here="$(cd "$(dirname "$0")" && pwd)"
array="$(sbatch --parsable "$here/grade-array.sbatch")"
sbatch --dependency="afterok:${array%%;*}" "$here/merge.sbatch"
