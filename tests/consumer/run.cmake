# ctest package_consumer: the README's "From C++" commands, as written, then
# the consumer project built and run against what they installed.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=... -DREADME=... -DCXX=... [-DLAUNCHER=...] -P run.cmake
# The README's sh block is run line by line in a directory where `build` is
# this build tree and $HOME is WORK_DIR/home: its configure line into a
# scratch directory (every -D option must be one the project uses), its
# install line as it stands; tools/install-deps.sh and the build line are
# what made this build tree.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/cwd ${WORK_DIR}/home)
file(CREATE_LINK ${BUILD_DIR} ${WORK_DIR}/cwd/build SYMBOLIC)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
                  WORKING_DIRECTORY ${WORK_DIR}/cwd)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "${cmd}\nexit ${rc}:\n${out}")
  endif()
  message("${out}")
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(READ ${README} readme)
string(FIND "${readme}" "\n## From C++\n" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${README} has no section \"From C++\"")
endif()
string(SUBSTRING "${readme}" ${at} -1 section)
string(REGEX MATCH "```sh\n([^`]*)```" block "${section}")
string(REGEX REPLACE "\n$" "" block "${CMAKE_MATCH_1}")
string(REPLACE ";" "\\;" block "${block}")
string(REPLACE "\n" ";" lines "${block}")
set(installed OFF)
set(prefix_path "")
foreach(line IN LISTS lines)
  if(line MATCHES "^cmake -S \\. -B build( .*)$")
    # Configure only (the build line compiles what this build tree already has).
    run(${CMAKE_COMMAND} -E env HOME=${WORK_DIR}/home bash -c
        "cmake -S '${SOURCE_DIR}/../..' -B '${WORK_DIR}/readme-configure'${CMAKE_MATCH_1}")
    if(out MATCHES "Manually-specified variables were not used")
      message(FATAL_ERROR "README \"From C++\": an option of '${line}' is not used by the project:\n${out}")
    endif()
  elseif(line MATCHES "^cmake --install build ")
    run(${CMAKE_COMMAND} -E env HOME=${WORK_DIR}/home bash -c "${line}")
    set(installed ON)
  elseif(line MATCHES "^# in your project: cmake -DCMAKE_PREFIX_PATH=\"\\$HOME(.*)\" \\.\\.\\.$")
    set(prefix_path ${WORK_DIR}/home${CMAKE_MATCH_1})
  elseif(NOT line MATCHES "^(tools/install-deps\\.sh|cmake --build build .*)$")
    message(FATAL_ERROR "README \"From C++\": this test does not know the command '${line}'")
  endif()
endforeach()
if(NOT installed OR NOT prefix_path)
  message(FATAL_ERROR "README \"From C++\": no 'cmake --install build ...' line or no CMAKE_PREFIX_PATH comment")
endif()

run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix_path} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
# The installed tool runs from the prefix (its RPATH finds a shared libfp4emu there).
if(EXISTS ${prefix_path}/bin/fp4emu)
  run(${prefix_path}/bin/fp4emu formats)
endif()
