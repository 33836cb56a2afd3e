#!/bin/bash
# One RL seed of a declared tool-task protocol (docs/results_code_synth_tool.md): the whole `rlvr train`
# command timed, its wall clock written to RUN/command_wall_s (read by calculator_gain.py), its CPU time
# (user + system, sandbox processes included) to RUN/command_cpu_s, and the load average at start and
# end to RUN/load_avg.
#   benchmarks/studies/run_tool_seed.sh RUN_DIR rlvr train CONFIG [overrides ...]
set -euo pipefail
run=$1; shift
export OMP_NUM_THREADS=1
start_load=$(cut -d' ' -f1-3 /proc/loadavg)
times=$(mktemp)
/usr/bin/time -f '%e %U %S' -o "$times" nice -n 10 "$@" --run-dir "$run" --plain
read -r wall user sys < "$times"
echo "$wall" > "$run/command_wall_s"
python3 -c "print($user + $sys)" > "$run/command_cpu_s"
echo "start $start_load end $(cut -d' ' -f1-3 /proc/loadavg)" > "$run/load_avg"
rm -f "$times"
