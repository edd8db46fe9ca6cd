// GTK 4 (Debian: libgtk-4-dev), for the graphical prompt agent's window (CPromptWindow). Swift
// sees only CPromptWindow's small interface, not GTK's headers.
#include <gtk/gtk.h>
