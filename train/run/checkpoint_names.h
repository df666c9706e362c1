// The checkpoint key convention and the renames that keep older files loading.
//
// Keys are the module paths of nn/models.cpp (docs/interop.md lists them all). Since the naming
// was made consistent, both stacks of a translator read the same way:
//
//   encoder.layers.N.*   encoder.final_norm.{ln|affine}.*
//   decoder.layers.N.*   decoder.final_norm.{ln|affine}.*
//
// Files written before that named the decoder `decoder.N.*` and its final LayerNorm
// `decoder_norm.*`. Every loader (load_weights, load_checkpoint, average_checkpoints,
// export_weights) renames such keys on reading, so old checkpoints keep working and what they
// write is in the current names.
#pragma once
#include <string>

namespace mixlab {

// The current name of a key (model tensor, "optimizer.<key>.<slot>" or an optimizer's
// per-parameter entry); current names come back unchanged.
std::string current_checkpoint_key(const std::string& key);

}  // namespace mixlab
