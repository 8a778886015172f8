#!/usr/bin/env bash
# Build the tiercast image from deploy/Dockerfile, from the repository root, and push it.
#
#   deploy/build-image.sh [--push] [IMAGE]
#
# IMAGE defaults to ghcr.io/tiercast/tiercast:VERSION (VERSION from pyproject.toml), the
# name the manifests in deploy/ use. To run your own build, push it where the cluster
# pulls from and point the manifests at it with the `images:` lines this script prints
# (docs/install.md, "The container image").
# Environment: CONTAINER_ENGINE (docker, the default, or podman), PLATFORM (for example
# linux/amd64 or linux/arm64: the GPU nodes' architecture when it differs from this one).
set -euo pipefail

push=false
image=""
for arg in "$@"; do
  case "$arg" in
    --push) push=true ;;
    -h | --help)
      sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    -*)
      echo "build-image.sh: unknown option $arg (expected --push or an image name)" >&2
      exit 2
      ;;
    *) image="$arg" ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
version="$(sed -n 's/^version = "\([^"]*\)"$/\1/p' "$root/pyproject.toml" | head -n 1)"
if [[ -z "$version" ]]; then
  echo "build-image.sh: no version in $root/pyproject.toml" >&2
  exit 1
fi
image="${image:-ghcr.io/tiercast/tiercast:$version}"
engine="${CONTAINER_ENGINE:-docker}"

platform=()
if [[ -n "${PLATFORM:-}" ]]; then
  platform=(--platform "$PLATFORM")
fi
"$engine" build "${platform[@]}" -f "$root/deploy/Dockerfile" -t "$image" "$root"
if [[ "$push" == true ]]; then
  "$engine" push "$image"
fi

name="${image%:*}"
tag="${image##*:}"
if [[ "$name" == "$image" || "$tag" == */* ]]; then
  name="$image"
  tag="latest"
fi
cat <<MSG
built $image$([[ "$push" == true ]] && echo " and pushed it")
To deploy it, add to deploy/base/kustomization.yaml:
images:
  - name: ghcr.io/tiercast/tiercast
    newName: $name
    newTag: "$tag"
MSG
