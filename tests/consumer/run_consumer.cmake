# cmake -P script: install, configure the consumer, build it, run it.
file(REMOVE_RECURSE "${WORK_DIR}")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install "${SMAX_BINARY_DIR}" --prefix "${WORK_DIR}/prefix")

set(flags "")
if(SANITIZE)
  # The installed library was built with sanitizers; the consumer must link their runtimes.
  set(flags "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
if(TOOLCHAIN)
  list(APPEND flags "-DCMAKE_TOOLCHAIN_FILE=${TOOLCHAIN}")
endif()
separate_arguments(emulator UNIX_COMMAND "${EMULATOR}")
run(${CMAKE_COMMAND} -S "${CONSUMER_SOURCE_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
    "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}" "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" ${flags})
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run(${emulator} "${WORK_DIR}/build/consumer")
if(NOT last_output MATCHES "consumer ok")
  message(FATAL_ERROR "unexpected consumer output: ${last_output}")
endif()
message(STATUS "${last_output}")
