#!/usr/bin/env bash
# Records the busy_gate runs (README.md here): bench_slowdown.py on the CPU, quick profile, one torch thread,
# beside two `yes > /dev/null` neighbours started here (and whatever else the shared machine runs), baseline with
# 2 matmuls per call and candidate with 3 (a real 1.5x of work), single runs and --bench-rounds 3, with the run's
# session at autogroup nice 0 (the neighbours' priority: the run is starved), -5, -10 and -19 (how this project's
# other CPU recordings were taken, so that the run is not starved). Run from the repository root in its venv.
set -euo pipefail
out=${1:-tests/data/busy_gate}
bench=tests/data/busy_gate/bench_slowdown.py
yes > /dev/null & first=$!
yes > /dev/null & second=$!
trap 'kill "$first" "$second"' EXIT
sleep 1
run() {  # NAME WORK NICE [pytest options...]
    local name=$1 work=$2 nice=$3; shift 3
    echo "$name: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    setsid bash -c 'echo "$0" > /proc/$$/autogroup; exec "${@}"' "$nice" \
        env OMP_NUM_THREADS=1 BUSY_GATE_WORK="$work" python -m pytest -p no:cacheprovider -q "$bench" \
        --benchmark-only --bench-device cpu --bench-profile quick --benchmark-json "$out/$name.json" "$@" \
        > /dev/null
}
for nice in 0 -5 -10 -19; do
    run "nice${nice}_base" 2 "$nice"
    run "nice${nice}_cand_1.5x" 3 "$nice"
    run "nice${nice}_base_rounds3" 2 "$nice" --bench-rounds 3
    run "nice${nice}_cand_1.5x_rounds3" 3 "$nice" --bench-rounds 3
done
echo "done: load average $(cut -d' ' -f1-3 /proc/loadavg)"
