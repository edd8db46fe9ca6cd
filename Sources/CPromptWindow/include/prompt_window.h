// The prompt agent's window (GTK 4), behind an interface small enough for Swift: the agent's
// Swift code speaks the daemon's protocol and calls these on GTK's main thread.
#ifndef LA_PROMPT_WINDOW_H
#define LA_PROMPT_WINDOW_H

/// One screen of a prompt, as the daemon sends it. Every string is the daemon's (the app's name is
/// its verified identity; the reason and titles are the app's own text, shown as plain text).
typedef struct {
    const char *app;
    const char *heading;         // after the app's name: "wants to confirm it is you", or administration's
    int administration;          // the person allows administration (the window's title says so)
    const char *reason;
    const char *instruction;
    const char *cancel_title;
    const char *fallback_title;  // NULL: no fallback button now
    const char *warning;         // NULL: nothing to warn about
    const char *sensor_name;     // NULL: no sensor
    int passcode_entry;          // whether a passcode is accepted now
    int retry_offered;           // Face ID's "Try Again"
    int simulated_touches;       // a simulated sensor is armed: offer scripted touches
} la_prompt_screen;

/// What the person did (`passcode` is set only with LA_PROMPT_PASSCODE, and only for the call).
enum {
    LA_PROMPT_PASSCODE = 1,
    LA_PROMPT_CANCEL = 2,
    LA_PROMPT_FALLBACK = 3,
    LA_PROMPT_RETRY = 4,
    LA_PROMPT_SIMULATED_MATCH = 5,
    LA_PROMPT_SIMULATED_NO_MATCH = 6,
};
typedef void (*la_prompt_handler)(unsigned long long prompt, int action, const char *passcode, void *context);

/// Opens the display; 0 when there is none.
int la_prompt_init(void);
void la_prompt_set_handler(la_prompt_handler handler, void *context);
/// Shows `screen` for `prompt`: a new window, or the prompt's window updated. Main thread.
void la_prompt_show(unsigned long long prompt, const la_prompt_screen *screen);
/// Closes the prompt's window, if it has one. Main thread.
void la_prompt_close(unsigned long long prompt);
/// Closes every window (the daemon went away). Main thread.
void la_prompt_close_all(void);
/// Runs `body(data)` on the main thread soon; callable from any thread.
void la_prompt_call_on_main(void (*body)(void *), void *data);
/// Runs GTK's main loop until `la_prompt_quit`.
void la_prompt_run(void);
void la_prompt_quit(void);

#endif
