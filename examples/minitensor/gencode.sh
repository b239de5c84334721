#!/bin/sh
# gencode.sh [--names] LIST: nvcc -gencode flags for a list of compute
# capabilities as TORCH_CUDA_ARCH_LIST writes it ("8.0;9.0", "8.6+PTX",
# "9.0a"; ';' or spaces between). --names prints what the binaries carry
# instead: "sm_80 sm_90", with "compute_86" for the PTX of a +PTX entry.
names=
if [ "$1" = --names ]; then names=1; shift; fi
list=$(echo "$1" | tr ';' ' ')
[ -n "$list" ] || { echo "gencode.sh: no compute capabilities (set TORCH_CUDA_ARCH_LIST, e.g. 8.0;9.0)" >&2; exit 1; }
out=
for cc in $list; do
  ptx=
  case $cc in *+PTX) ptx=1; cc=${cc%+PTX} ;; esac
  case $cc in [0-9]*.[0-9]|[0-9]*.[0-9][af]) ;; *) echo "gencode.sh: bad compute capability '$cc'" >&2; exit 1 ;; esac
  n=$(echo "$cc" | tr -d .)
  if [ -n "$names" ]; then
    out="$out sm_$n"
    [ -z "$ptx" ] || out="$out compute_$n"
  else
    out="$out -gencode arch=compute_$n,code=sm_$n"
    [ -z "$ptx" ] || out="$out -gencode arch=compute_$n,code=compute_$n"
  fi
done
echo $out
