#!/bin/bash
# Queue the grading array, then the merge once every array task has succeeded.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
array="$(sbatch --parsable "$here/grade-array.sbatch")"
sbatch --dependency="afterok:${array%%;*}" "$here/merge.sbatch"
