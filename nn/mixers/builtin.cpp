// The list of built-in mixers: each family's file defines its register_* function, which adds
// its MixerInfo entries to the registry. A new mixer adds one file and one line here.
#include "nn/mixer_registry.h"

namespace mixlab {

#define MIXLAB_MIXER_FAMILY(fn) void fn(MixerRegistry&);
MIXLAB_MIXER_FAMILY(register_attention_mixer)
MIXLAB_MIXER_FAMILY(register_synthesizer_mixers)
MIXLAB_MIXER_FAMILY(register_mlp_mixer_mixer)
MIXLAB_MIXER_FAMILY(register_resmlp_mixer)
MIXLAB_MIXER_FAMILY(register_ffonly_mixer)
MIXLAB_MIXER_FAMILY(register_external_mixer)
MIXLAB_MIXER_FAMILY(register_fnet_mixer)
MIXLAB_MIXER_FAMILY(register_gmlp_mixers)
MIXLAB_MIXER_FAMILY(register_hcsa_mixer)
MIXLAB_MIXER_FAMILY(register_conv_mixers)
MIXLAB_MIXER_FAMILY(register_linformer_mixer)
MIXLAB_MIXER_FAMILY(register_linear_attention_mixer)
MIXLAB_MIXER_FAMILY(register_mamba_mixer)
MIXLAB_MIXER_FAMILY(register_retnet_mixer)
MIXLAB_MIXER_FAMILY(register_s4d_mixer)
MIXLAB_MIXER_FAMILY(register_hyena_mixer)
#undef MIXLAB_MIXER_FAMILY

void register_builtin_mixers(MixerRegistry& registry) {
  for (auto fn :
       {register_attention_mixer, register_synthesizer_mixers, register_mlp_mixer_mixer,
        register_resmlp_mixer, register_ffonly_mixer, register_external_mixer, register_fnet_mixer,
        register_gmlp_mixers, register_hcsa_mixer, register_conv_mixers, register_linformer_mixer,
        register_linear_attention_mixer, register_mamba_mixer, register_retnet_mixer,
        register_s4d_mixer, register_hyena_mixer})
    fn(registry);
}

}  // namespace mixlab
