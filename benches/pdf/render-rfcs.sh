#!/usr/bin/env bash
# Renders Rust RFCs (Markdown with real heading trees) to PDF the way a
# person would print them: pandoc to HTML, then headless Chromium's print
# to PDF (its default page header and footer included), once with the
# document outline (bookmarks) and once without. For tree recovery:
#
#   benches/pdf/render-rfcs.sh OUT [EVERY]      # every EVERY-th RFC (10)
#   edudb eval structure RFC.md... --rendered OUT/outline
#   edudb eval structure RFC.md... --rendered OUT/plain
#   edudb eval structure RFC.md...              # the plain-text baseline
#
# Needs Debian's `chromium` and `pandoc`. Prints the Markdown files it
# rendered, one per line, for the commands above.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rfcs="$here/../../../shared/data/rust_rfcs/text"
out=${1:?usage: render-rfcs.sh OUT [EVERY]}
every=${2:-10}
mkdir -p "$out/html" "$out/outline" "$out/plain"
out=$(cd "$out" && pwd)
print() { # $1: PDF to write, $2: HTML, rest: extra Chromium flags
    local pdf=$1 html=$2
    shift 2
    chromium --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$out/.chromium" "$@" \
        --print-to-pdf="$pdf" "file://$html" >/dev/null 2>&1
}
i=0
for md in "$rfcs"/*.md; do
    i=$((i + 1))
    (((i - 1) % every == 0)) || continue
    id=$(basename "$md" .md)
    html="$out/html/$id.html"
    # pagetitle: the HTML's <title> only; no title block the Markdown lacks.
    pandoc --from gfm --to html5 --standalone --metadata pagetitle="$id" "$md" -o "$html"
    print "$out/outline/$id.pdf" "$html" --generate-pdf-document-outline
    print "$out/plain/$id.pdf" "$html"
    echo "$md"
done
