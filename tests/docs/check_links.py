#!/usr/bin/env python3
"""Fails when a Markdown file of the repository links to a file that is not there.

Usage: check_links.py SOURCE_DIR

Every *.md file under SOURCE_DIR (but build trees, node_modules and dot
directories) is read for inline links and images, [text](target) and
![alt](target). A target with a scheme (https:, mailto:) or only an anchor
(#section) is left alone; any other is a path relative to the file (or to
SOURCE_DIR when it starts with /), without its #anchor, and must exist.
Prints each broken link as FILE:LINE: target, and exits 1 if there is one.
"""

import os
import re
import sys

# [text](target) or ![alt](target), the target up to a space or ")"; an
# optional "title" after the target is not part of it.
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
SKIPPED_DIRS = {"build", "node_modules"}


def markdown_files(root):
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(
            d for d in subdirs if d not in SKIPPED_DIRS and not d.startswith(".")
        )
        for name in sorted(files):
            if name.endswith(".md"):
                yield os.path.join(directory, name)


def broken_links(root, path):
    in_code = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            if in_code:
                continue
            # Inline code spans are not links.
            text = re.sub(r"`[^`]*`", "", line)
            for match in LINK.finditer(text):
                target = match.group(1)
                if SCHEME.match(target) or target.startswith("#"):
                    continue
                target = target.split("#", 1)[0]
                if target.startswith("/"):
                    resolved = os.path.join(root, target.lstrip("/"))
                else:
                    resolved = os.path.join(os.path.dirname(path), target)
                if not os.path.exists(resolved):
                    yield number, match.group(1)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    count = 0
    broken = 0
    for path in markdown_files(root):
        count += 1
        for number, target in broken_links(root, path):
            print(f"{os.path.relpath(path, root)}:{number}: {target}")
            broken += 1
    if broken:
        print(f"{broken} broken links in {count} Markdown files", file=sys.stderr)
        return 1
    print(f"every link in {count} Markdown files points to a file that exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
