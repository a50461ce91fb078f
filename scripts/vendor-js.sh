#!/usr/bin/env bash
# Vendored browser libraries for the streaming answer renderer (static/vendor/), from the npm
# registry at pinned versions, checked against the registry's integrity hashes and against the
# SHA-256 of the committed files. The files are committed, so `make run` needs no network and
# no Node.js; run this script to re-fetch and verify them (`make vendor`).
#   markdown-it 14.1.0 (the version markdown-it-py 4.x ports: same block rules as the server)
#   dompurify 3.2.6
# and, for the browser tests only (tests/vendor/, never served): axe-core 4.14.1, the accessibility
# checker the tests run on every page (tests/test_ui_browser.py).
set -euo pipefail
cd "$(dirname "$0")/.."
out=static/vendor
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fetch() {  # name version integrity dist-file sha256 [package-dir [out-dir]]
  local name=$1 version=$2 integrity=$3 file=$4 sha=$5 dir=${6:-dist} out=${7:-$out}
  local url="https://registry.npmjs.org/$name/-/$name-$version.tgz"
  curl -fsSL "$url" -o "$tmp/$name.tgz"
  local got="sha512-$(openssl dgst -sha512 -binary "$tmp/$name.tgz" | base64 -w0)"
  [ "$got" = "$integrity" ] || { echo "$name $version: integrity mismatch ($got)"; exit 1; }
  local src="package/$dir/$file"; [ "$dir" = . ] && src="package/$file"
  tar xzf "$tmp/$name.tgz" -C "$tmp" "$src" "package/LICENSE"
  echo "$sha  $tmp/$src" | sha256sum -c --quiet -
  mkdir -p "$out"; cp "$tmp/$src" "$out/$file"; cp "$tmp/package/LICENSE" "$out/$name.LICENSE"
  rm -rf "$tmp/package"
  echo "$name $version -> $out/$file"
}
mkdir -p "$out"
fetch markdown-it 14.1.0 "sha512-a54IwgWPaeBCAAsv13YgmALOF1elABB08FxO9i+r4VFk5Vl4pKokRPeX8u5TCgSsPi6ec1otfLjdOpVcgbpshg==" \
  markdown-it.min.js 38c70a1e7ca91ab40e2d9e6e60129851a717ed1c7d4acbbdd41bf9503791cf68
fetch dompurify 3.2.6 "sha512-/2GogDQlohXPZe6D6NOgQvXLPSYBqIWMnZ8zzOhn09REE4eyAzb+Hed3jhoM9OkuaJ8P6ZGTTVWQKAi8ieIzfQ==" \
  purify.min.js 89e1fa7647cb495370d3a997ace4387f5d15d9f4c5af12352c53daa400956287
fetch axe-core 4.14.1 "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ==" \
  axe.min.js 29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c . tests/vendor
