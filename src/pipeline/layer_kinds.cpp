#include "pipeline/layer_kind.hpp"

namespace sb {

const std::vector<const LayerKind*>& layer_kinds() {
  static const std::vector<const LayerKind*> kinds = {
      &apt_layer_kind(),     //
      &pip_layer_kind(),     //
      &redist_layer_kind(),  //
      &step_layer_kind(),    //
      &copy_layer_kind(),    // last: every layer the others do not take
  };
  return kinds;
}

const LayerKind& layer_kind_of(const LayerSpec& spec) {
  for (const LayerKind* kind : layer_kinds())
    if (kind->handles(spec)) return *kind;
  return copy_layer_kind();
}

}  // namespace sb
