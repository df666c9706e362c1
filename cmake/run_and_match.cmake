# cmake -P driver for the example tests: runs PROGRAM with ARGS (a ;-list), requires exit status
# 0, and requires every regex of EXPECT (separated by |||) to match somewhere in its stdout.
execute_process(COMMAND ${PROGRAM} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}")
endif()
string(REPLACE "|||" ";" expect "${EXPECT}")
foreach(regex IN LISTS expect)
  if(NOT out MATCHES "${regex}")
    message(FATAL_ERROR "${PROGRAM}: no output matches '${regex}'")
  endif()
endforeach()
