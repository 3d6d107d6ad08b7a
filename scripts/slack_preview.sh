#!/usr/bin/env bash
# A Slack-style preview of a verdict message (blocks from culprit's Slack renderer, the
# picture as an image block, the buttons) as a PNG, for the README:
#   scripts/slack_preview.sh [CAPTURE] [OUT.png]   (default slow-sink, docs/slack-message.png)
# Needs Debian's chromium; trims the blank bottom with Pillow when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
capture=${1:-slow-sink}
out=${2:-docs/slack-message.png}
html=target/slack-preview.html
cargo run -q --example slack_preview -- "$capture" > "$html"
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
  --window-size=592,2600 --screenshot="$out" "file://$PWD/$html" 2>/dev/null
python3 - "$out" <<'PY' || true
import sys
from PIL import Image, ImageChops
p = sys.argv[1]
im = Image.open(p).convert("RGB")
bg = Image.new("RGB", im.size, (255, 255, 255))
box = ImageChops.difference(im, bg).getbbox()
if box:
    im.crop((0, 0, im.size[0], min(im.size[1], box[3] + 16))).save(p, optimize=True)
PY
echo "slack_preview: wrote $out"
