#!/usr/bin/env bash
# Records the advise sweeps of README.md here: `python -m suites advise` (CPU, quick profile) beside two
# `yes > /dev/null` neighbours started here (and whatever else the shared machine runs): the worked example
# (examples/conv_model.py) at the neighbours' priority and with the session at autogroup nice -19, and a model
# whose batches are noise (tests/user_models.py, noise_model), where fp32's own loss rises. Keeps each sweep's
# JSON files (sweep.json, remeasure.json, combination.json) and what advise printed (advise.txt).
# Run from the repository root in its venv.
set -euo pipefail
out=${1:-tests/data/busy_gate}
yes > /dev/null & first=$!
yes > /dev/null & second=$!
trap 'kill "$first" "$second"' EXIT
sleep 1
sweep() {  # NAME NICE ADVISE-ARGS...
    local name=$1 nice=$2; shift 2
    local tmp; tmp=$(mktemp -d)
    echo "$name: load average $(cut -d' ' -f1-3 /proc/loadavg)"
    set +e
    setsid bash -c 'echo "$0" > /proc/$$/autogroup; exec "${@}"' "$nice" \
        python -m suites advise "$@" --device cpu --out "$tmp" > "$tmp/advise.txt" 2>&1
    echo "exit $?" >> "$tmp/advise.txt"
    set -e
    mkdir -p "$out/$name"
    cp "$tmp"/*.json "$tmp/advise.txt" "$out/$name/"
    rm -rf "$tmp"
}
sweep advise_conv_busy 0 examples.conv_model:make_model
sweep advise_conv_favoured -19 examples.conv_model:make_model
sweep advise_noise_busy 0 tests.user_models:noise_model --batch tests.user_models:noise_batch --name noise_model
echo "done: load average $(cut -d' ' -f1-3 /proc/loadavg)"
