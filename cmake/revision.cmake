# cmake/revision.cmake: writes OUT, a header with the source tree's git revision (RN50_REVISION, "unknown" outside a
# git checkout unless RN50_REVISION is given, as the image build passes it), rewritten only when it changes so that
# nothing rebuilds for an unchanged revision. Run at every build (the rn50_revision target).
if(NOT REVISION)
  execute_process(COMMAND git -C "${SOURCE}" rev-parse --short=12 HEAD OUTPUT_VARIABLE REVISION
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
  if(failed OR REVISION STREQUAL "")
    set(REVISION "unknown")
  else()
    execute_process(COMMAND git -C "${SOURCE}" status --porcelain --untracked-files=no OUTPUT_VARIABLE changes
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(NOT changes STREQUAL "")
      set(REVISION "${REVISION}+changes")
    endif()
  endif()
endif()
set(text "// The source revision rn50 was built from (cmake/revision.cmake writes this file).\n#define RN50_REVISION \"${REVISION}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
