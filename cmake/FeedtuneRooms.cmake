# The arrows between the project's rooms, enforced by the build.
#
# feedtune_room(<target> MAY_INCLUDE <entry>...) checks, before <target>
# compiles, every project header that the target's sources (and the headers
# beside them) include: each must match an entry, either a folder ("loader/")
# or one header ("tuner/measure/measurer.h"). A wrong-way include stops the
# build with the file, the line and the rule it breaks, so an arrow the wrong
# way never reaches main. An include in angle brackets that names a project
# folder (<tuner/search/search.h>) is checked alike; system and generated
# headers are not. The rule lives beside the target in its CMakeLists.txt, and
# the target keeps it (property FEEDTUNE_ROOM_ALLOW) for the tests in tests/rooms.
set(FEEDTUNE_ROOM_CHECKER ${CMAKE_CURRENT_LIST_DIR}/check_room_includes.cmake)

function(feedtune_room target)
  cmake_parse_arguments(ROOM "" "" "MAY_INCLUDE" ${ARGN})
  set_property(TARGET ${target} PROPERTY FEEDTUNE_ROOM_ALLOW ${ROOM_MAY_INCLUDE})
  get_target_property(sources ${target} SOURCES)
  set(files "")
  foreach(source IN LISTS sources)
    get_filename_component(path ${source} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND files ${path})
    # The header beside a source file belongs to the same room.
    get_filename_component(dir ${path} DIRECTORY)
    get_filename_component(stem ${path} NAME_WE)
    if(EXISTS ${dir}/${stem}.h)
      list(APPEND files ${dir}/${stem}.h)
    endif()
  endforeach()
  file(GLOB extra_headers ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  list(APPEND files ${extra_headers})
  list(REMOVE_DUPLICATES files)
  string(REPLACE ";" "," files_arg "${files}")
  string(REPLACE ";" "," allow_arg "${ROOM_MAY_INCLUDE}")
  set(stamp ${CMAKE_CURRENT_BINARY_DIR}/${target}.rooms.stamp)
  add_custom_command(OUTPUT ${stamp}
    COMMAND ${CMAKE_COMMAND} -DROOM=${target} -DROOT=${PROJECT_SOURCE_DIR}
            "-DFILES=${files_arg}" "-DALLOW=${allow_arg}" -P ${FEEDTUNE_ROOM_CHECKER}
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS ${files} ${FEEDTUNE_ROOM_CHECKER}
    COMMENT "Checking the includes of ${target} against its room's arrows"
    VERBATIM)
  add_custom_target(${target}_rooms DEPENDS ${stamp})
  add_dependencies(${target} ${target}_rooms)
endfunction()
