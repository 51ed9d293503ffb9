# Strict warnings for feedtune's own targets (not for third-party code).
# feedtune_set_warnings(<target>) is called by every target the project defines.
function(feedtune_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                              -Wcast-align -Woverloaded-virtual -Wformat=2>)
  if(FEEDTUNE_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
    # GCC 12's -Wrestrict fires falsely inside libstdc++'s std::string when
    # inlined at -O2/-O3 (GCC bug 105329: `run.name = "w"`, `"s" + to_string(i)`);
    # which line trips it moves with unrelated changes, so it stays a warning.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-error=restrict>)
    endif()
  endif()
endfunction()
