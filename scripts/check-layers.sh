#!/usr/bin/env bash
# Fails when an include points where its layer may not look (docs/design/architecture.md). For every file in
# include/strider/<area>/ and src/<area>/, the strider headers it includes (public "strider/x/..."
# or private "x/..." under src/) must belong to an area it may use:
#   core      core only (nothing else of strider)
#   comm      core
#   sampling  core; and no MPI or HDF5 header at all (mpi.h, hdf5.h, H5*.h)
#   io        core, comm
#   pipeline  core, comm, sampling, io
#   device    core, comm, and of pipeline only its allocator interface (strider/pipeline/host_allocator.hpp)
#   train     all of these
# Public core headers include no MPI or HDF5 header either, so that sampling stays MPI-free through
# them. Apps (apps/, bench/, examples/, and bindings/ or python/ where they exist) include public
# headers (strider/...) only, plus their own folder and apps/common; bench/ (the measurement wing,
# strider/bench/...) is one of them, so the library, which may not include strider/bench/, never
# depends on what exists to measure it. strider/config.hpp counts as core. bench/scripts/ is not
# checked: its C++ programs time internals (the store's exchange, the lookahead's chunk cache) and
# compile the library's sources they need themselves, as tests do.
# Usage: scripts/check-layers.sh [ROOT]   (ROOT: a tree to check, default this repository)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

mapfile -t files < <(find include/strider src apps bench examples bindings python -type f \
  \( -name '*.hpp' -o -name '*.h' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) 2>/dev/null | sort)
if ((${#files[@]} == 0)); then
  echo "check-layers: no sources under $root" >&2
  exit 2
fi

# grep prints FILE:LINE:TEXT for every include; awk decides per line (no output: allowed).
violations=$(grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "${files[@]}" | awk -F: '
  BEGIN {
    split("core comm sampling io pipeline device train", list, " ")
    for (i in list) is_area[list[i]] = 1
    allowed["core"] = " core "
    allowed["comm"] = " core comm "
    allowed["sampling"] = " core sampling "
    allowed["io"] = " core comm io "
    allowed["pipeline"] = " core comm sampling io pipeline "
    allowed["device"] = " core comm device "
    allowed["train"] = " core comm sampling io pipeline device train "
    rule["core"] = "core only"
    rule["comm"] = "core"
    rule["sampling"] = "core, no MPI"
    rule["io"] = "core, comm"
    rule["pipeline"] = "core, comm, sampling, io"
    rule["device"] = "core, comm, strider/pipeline/host_allocator.hpp"
    rule["train"] = "core, comm, sampling, io, pipeline, device"
  }
  {
    file = $1; line = $2
    text = $0; sub(/^[^:]*:[^:]*:/, "", text)
    match(text, /[<"][^>"]+[>"]/)
    quote = substr(text, RSTART, 1)
    target = substr(text, RSTART + 1, RLENGTH - 2)
    n = split(file, part, "/")
    if (part[1] == "bench" && part[2] == "scripts") next
    if (part[1] == "include" && part[2] == "strider" && n >= 4) { kind = "area"; area = part[3]; public_header = 1 }
    else if (part[1] == "src" && n >= 3) { kind = "area"; area = part[2]; public_header = 0 }
    else if (part[1] == "apps" || part[1] == "bench" || part[1] == "examples" || part[1] == "bindings" || part[1] == "python") kind = "app"
    else next

    # What the include points at: an area of strider, or nothing of strider (a system header).
    m = split(target, piece, "/")
    points = ""
    if (piece[1] == "strider" && m == 2 && piece[2] == "config.hpp") points = "core"
    else if (piece[1] == "strider" && m >= 3) points = piece[2]
    else if (quote == "\"" && m >= 2 && (piece[1] in is_area)) points = piece[1]
    else if (quote == "\"" && m == 1) points = "here"
    mpi = (target == "mpi.h" || target == "hdf5.h" || target ~ /^H5[A-Za-z]*\.h$/)

    if (kind == "app") {
      if (piece[1] == "strider" || piece[1] == "common" || (quote == "\"" && m == 1)) next
      if (quote == "<" && !(piece[1] in is_area)) next  # a system or third-party header
      printf "%s:%s: an app includes a private header \"%s\" (apps: public headers strider/... only, and apps/common)\n", file, line, target
      next
    }
    if (points == "here") points = area
    if (area == "sampling" && mpi) {
      printf "%s:%s: sampling includes <%s> (sampling: no MPI or HDF5 header)\n", file, line, target
      next
    }
    if (area == "core" && public_header && mpi) {
      printf "%s:%s: a public core header includes <%s> (it would bring MPI into sampling)\n", file, line, target
      next
    }
    if (points == "" || index(allowed[area], " " points " ") > 0) next
    if (area == "device" && target == "strider/pipeline/host_allocator.hpp") next
    printf "%s:%s: %s includes \"%s\" (%s may include %s)\n", file, line, area, target, area, rule[area]
  }')

if [[ -n $violations ]]; then
  echo "$violations" >&2
  echo "check-layers: $(wc -l <<<"$violations") include(s) point where their layer may not look (docs/design/architecture.md)" >&2
  exit 1
fi
echo "check-layers: ${#files[@]} files, every include within its layer"
