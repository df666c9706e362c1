# The speed table's quick mode in the suite (bench/speed_table.py through scripts/bench-speed.sh):
# it checks that every mixer's PyTorch classifier is mixlab's (equal parameter counts, and
# mixlab's weights loaded into it give mixlab's logits) and that the comparison runs end to end. Without PyTorch 2 (in .venv/ or python3) it reports itself skipped (exit 77).
if(MIXLAB_TESTS AND MIXLAB_BENCH)
  set(MIXLAB_SPEED_TEST "bench: speed table --quick against PyTorch (skipped without torch)")
  add_test(NAME "${MIXLAB_SPEED_TEST}"
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/scripts/bench-speed.sh --skip-without-torch --quick
            --threads 1 --build ${CMAKE_BINARY_DIR})
  set_tests_properties("${MIXLAB_SPEED_TEST}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900)
  # The table's closing lines score the speed targets (bench/speed_targets.py); its examples
  # are its test, and need no PyTorch.
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    add_test(NAME "bench: the speed table scores its targets (speed_targets.py's examples)"
      COMMAND ${Python3_EXECUTABLE} -m doctest ${CMAKE_CURRENT_SOURCE_DIR}/bench/speed_targets.py)
  endif()
  # The products alone (bench/gemm_vs_torch.py): OpenBLAS's and PyTorch's on the classifier's
  # shapes; skipped (77) without a Python that imports torch.
  set(MIXLAB_GEMM_TEST "bench: the classifier's products against PyTorch's (skipped without torch)")
  add_test(NAME "${MIXLAB_GEMM_TEST}"
    COMMAND sh -c "py=${CMAKE_CURRENT_SOURCE_DIR}/.venv/bin/python; \"$py\" -c 'import torch' 2>/dev/null || py=python3; \"$py\" -c 'import torch' 2>/dev/null || { echo 'SKIP: no PyTorch'; exit 77; }; exec \"$py\" ${CMAKE_CURRENT_SOURCE_DIR}/bench/gemm_vs_torch.py --threads 1 --build ${CMAKE_BINARY_DIR}")
  set_tests_properties("${MIXLAB_GEMM_TEST}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# How each mixer's cost grows with the sequence length (bench/scaling.py, docs/study/scaling/):
# its --quick mode (two mixers, N up to 256, one round) runs the pipeline end to end against
# PyTorch and checks its figures for tick and axis labels; skipped (77) without torch. Its
# examples (the fit, the ticks, the figure check) need no PyTorch.
if(MIXLAB_TESTS AND MIXLAB_BENCH)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    set(MIXLAB_SCALING_TEST "bench: cost against length --quick against PyTorch (skipped without torch)")
    add_test(NAME "${MIXLAB_SCALING_TEST}"
      COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/bench/scaling.py --quick
              --skip-without-torch --build ${CMAKE_BINARY_DIR}
              --out ${CMAKE_BINARY_DIR}/scaling-quick)
    set_tests_properties("${MIXLAB_SCALING_TEST}" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
    add_test(NAME "bench: scaling.py's examples (fit, ticks, the figure check)"
      COMMAND ${Python3_EXECUTABLE} -m doctest ${CMAKE_CURRENT_SOURCE_DIR}/bench/scaling.py)
  endif()
  # bench_train_step --input tokens with --mixer-opt, scaling.py's mixlab side: the option is
  # applied (Linformer's E and F are p×ℓ each, so proj-len 8 instead of 4 at ℓ = 32 adds
  # 2·4·32 = 256 parameters), and the classifier reads tokens.
  add_test(NAME "bench: bench_train_step --input tokens applies --mixer-opt (Linformer's proj-len)"
    COMMAND sh -c "set -e; run() { $<TARGET_FILE:bench_train_step> --task classify --input tokens \
      --mixer linformer --mixer-opt proj-len=$1 --len 32 --batch 4 --dim 16 --layers 1 \
      --steps 1 --warmup 0; }; a=$(run 4); b=$(run 8); echo \"$a\" | grep -q 'input=tokens len=32'; \
      pa=$(echo \"$a\" | sed -n 's/.*\\\"params\\\": \\([0-9]*\\).*/\\1/p'); \
      pb=$(echo \"$b\" | sed -n 's/.*\\\"params\\\": \\([0-9]*\\).*/\\1/p'); \
      echo \"params $pa, $pb\"; test $((pb - pa)) -eq 256")
endif()
