// libsystemd's sd-bus, for the fprintd sensor (Debian: libsystemd-dev). Swift cannot call C
// variadic functions, so the sensor uses only the non-variadic part of this API.
#include <systemd/sd-bus.h>
