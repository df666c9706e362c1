# The engine's layers, lowest first, and the folders each one may include from (itself and the
# layers below it). The one table that both the build (cmake/layers.cmake: one library per layer,
# each seeing only these folders' headers) and the include check (cmake/check_layers.cmake) read.
#
#   mixlab (apps/)                the command line: one thin file per subcommand
#        |
#   mixlab_lab (lab/)             the lab: study (grids of runs, their statistics and report),
#        |                        inspect (mixing matrices), every picture (SVG plots, heatmaps)
#        |
#   mixlab_train (train/)         data/ sets and loader, optim/ optimisers and schedules, run/
#        |                        checkpoints and progress, distributed/, loop/ the trainer
#        |
#   mixlab_nn (nn/)               modules, mixers, models
#      /     \
#   mixlab_autograd (autograd/)   the Tensor, differentiable ops, backward()
#      |        \
#   mixlab_backends (backends/)    mixlab_io (io/)   JSON, safetensors, atomic files, CSV logs
#      |   kernel interface,         |
#      |   cpu/ (OpenBLAS, FFTW),    |
#      |   cuda/ (cuBLAS, cuFFT)     |
#   mixlab_core (core/)  <-----------+   dtypes, devices, shapes, errors, threads, RNG
set(MIXLAB_LAYERS core backends io autograd nn train lab apps)
set(MIXLAB_LAYER_core_SEES core)
set(MIXLAB_LAYER_backends_SEES core backends)
set(MIXLAB_LAYER_io_SEES core io)
set(MIXLAB_LAYER_autograd_SEES core backends io autograd)
set(MIXLAB_LAYER_nn_SEES core backends io autograd nn)
set(MIXLAB_LAYER_train_SEES core backends io autograd nn train)
set(MIXLAB_LAYER_lab_SEES core backends io autograd nn train lab)
set(MIXLAB_LAYER_apps_SEES core backends io autograd nn train lab apps)
