# Strict warnings for feedtune's own targets (not for third-party code).
# feedtune_set_warnings(<target>) is called by every target the project defines.
function(feedtune_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                              -Wcast-align -Woverloaded-virtual -Wformat=2>)
  if(FEEDTUNE_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
