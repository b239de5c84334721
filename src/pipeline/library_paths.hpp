// Where the layers below a build-step layer put cuDNN and NCCL, as the
// variables frameworks' build systems read (PyTorch's FindCUDNN/FindNCCL,
// TransformerEngine's CUDNN_PATH), so a recipe compiling against them need
// not spell out paths that depend on how they were installed:
//
//   redist (use: [cudnn, nccl])    /usr/local/cuda-X.Y/{include,lib64}  (src/fetch/redist/install.cpp)
//   wheels (from: wheel, or pip:)  <site-packages>/nvidia/<cudnn|nccl>/{include,lib}
//   apt (from: apt, or apt:)       /usr/include, /usr/lib/<triplet>
#pragma once

#include <map>
#include <string>

#include "pipeline/point_inputs.hpp"
#include "recipe/recipe.hpp"

namespace sb {

// For each of cuDNN and NCCL that a layer below `layer` (in the recipe's
// order) installs, the topmost such layer decides: CUDNN_ROOT, CUDNN_HOME,
// CUDNN_PATH, CUDNN_INCLUDE_DIR, CUDNN_LIB_DIR and NCCL_ROOT, NCCL_HOME,
// NCCL_INCLUDE_DIR, NCCL_LIB_DIR. A layer installs one when its `use:` names
// it (redist, wheel or apt by the layer's kind), its `apt:` names a libcudnn*
// / libnccl* package or its `pip:` an nvidia-cudnn* / nvidia-nccl* wheel.
// Failing those, a component the point resolved (in `variables`) that some
// layer of wheels below brings as a dependency (torch pulls nvidia-cudnn-cu12)
// is taken to be in site-packages. Nothing for a component no layer below
// installs (a copy layer or build steps may, but say nothing about where).
// The wheels' site-packages is pip_target()'s at `point`.
std::map<std::string, std::string> library_paths(const Recipe& recipe, const LayerSpec& layer,
                                                 const std::map<std::string, std::string>& variables,
                                                 const PointInputs& point);

}  // namespace sb
