// Linux-PAM, for checking the device passcode as the user's login password (Debian: libpam0g-dev).
#include <security/pam_appl.h>
