// libsystemd's sd-bus, for the fprintd sensor (Debian: libsystemd-dev). Swift cannot call C
// variadic functions, so the sensor uses only the non-variadic part of this API.
#include <systemd/sd-bus.h>
// sd-login: a process's logind session (the graphical prompt agent serves its own session's apps).
#include <systemd/sd-login.h>
