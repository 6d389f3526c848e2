// libibverbs is loaded in dynload/ with the other run-time libraries; verify's files keep
// including it by this name.
#pragma once

#include "gdrpeer/dynload/verbs.hpp"
