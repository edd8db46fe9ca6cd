// The prompt agent's window. Each prompt the daemon sends gets one window; its screens update
// it; the person's answers go to the handler, which sends them to the daemon. The window never
// decides anything: the daemon says what is offered, and checks every answer again.
#include <gtk/gtk.h>
#include "prompt_window.h"

typedef struct {
    guint64 prompt;
    GtkWidget *window, *heading, *reason, *warning, *instruction, *entry;
    GtkWidget *ok, *cancel, *fallback, *retry, *match, *no_match;
    gboolean closing;  // closed by the daemon: the window's own close is not a cancel then
} prompt_window;

static GHashTable *windows;  // guint64 prompt -> prompt_window*
static la_prompt_handler handler;
static void *handler_context;
static GMainLoop *loop;

static void answer(prompt_window *w, int action, const char *passcode) {
    if (handler && !w->closing) handler(w->prompt, action, passcode, handler_context);
}

static void submit_passcode(prompt_window *w) {
    const char *typed = gtk_editable_get_text(GTK_EDITABLE(w->entry));
    if (!typed || !*typed) return;
    answer(w, LA_PROMPT_PASSCODE, typed);
    gtk_editable_set_text(GTK_EDITABLE(w->entry), "");
    gtk_label_set_text(GTK_LABEL(w->instruction), "Checking…");
}

static void on_entry_activate(GtkWidget *entry, gpointer data) { (void)entry; submit_passcode(data); }
static void on_ok(GtkButton *b, gpointer data) { (void)b; submit_passcode(data); }
static void on_cancel(GtkButton *b, gpointer data) { (void)b; answer(data, LA_PROMPT_CANCEL, NULL); }
static void on_fallback(GtkButton *b, gpointer data) { (void)b; answer(data, LA_PROMPT_FALLBACK, NULL); }
static void on_retry(GtkButton *b, gpointer data) { (void)b; answer(data, LA_PROMPT_RETRY, NULL); }
static void on_match(GtkButton *b, gpointer data) { (void)b; answer(data, LA_PROMPT_SIMULATED_MATCH, NULL); }
static void on_no_match(GtkButton *b, gpointer data) { (void)b; answer(data, LA_PROMPT_SIMULATED_NO_MATCH, NULL); }

// The window's own close button is Cancel; the window stays until the daemon closes the prompt.
static gboolean on_close_request(GtkWindow *window, gpointer data) {
    (void)window;
    prompt_window *w = data;
    if (w->closing) return FALSE;
    answer(w, LA_PROMPT_CANCEL, NULL);
    return TRUE;
}

// Escape is Cancel, as in every dialog.
static gboolean on_key(GtkEventControllerKey *controller, guint keyval, guint keycode, GdkModifierType state, gpointer data) {
    (void)controller; (void)keycode; (void)state;
    if (keyval != GDK_KEY_Escape) return FALSE;
    answer(data, LA_PROMPT_CANCEL, NULL);
    return TRUE;
}

static GtkWidget *wrapped_label(void) {
    GtkWidget *label = gtk_label_new(NULL);
    gtk_label_set_wrap(GTK_LABEL(label), TRUE);
    gtk_label_set_xalign(GTK_LABEL(label), 0);
    gtk_label_set_max_width_chars(GTK_LABEL(label), 48);
    return label;
}

static GtkWidget *button(const char *title, GCallback clicked, prompt_window *w, GtkWidget *row) {
    GtkWidget *b = gtk_button_new_with_label(title);
    g_signal_connect(b, "clicked", clicked, w);
    gtk_box_append(GTK_BOX(row), b);
    return b;
}

static prompt_window *new_window(guint64 prompt) {
    prompt_window *w = g_new0(prompt_window, 1);
    w->prompt = prompt;
    w->window = gtk_window_new();
    // Freed with the window, after its widgets (whose handlers hold it) are gone.
    g_object_set_data_full(G_OBJECT(w->window), "la-prompt-window", w, g_free);
    gtk_window_set_default_size(GTK_WINDOW(w->window), 460, -1);
    gtk_window_set_resizable(GTK_WINDOW(w->window), FALSE);
    g_signal_connect(w->window, "close-request", G_CALLBACK(on_close_request), w);
    GtkEventController *keys = gtk_event_controller_key_new();
    g_signal_connect(keys, "key-pressed", G_CALLBACK(on_key), w);
    gtk_widget_add_controller(w->window, keys);

    GtkWidget *box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 10);
    gtk_widget_set_margin_top(box, 18);
    gtk_widget_set_margin_bottom(box, 18);
    gtk_widget_set_margin_start(box, 18);
    gtk_widget_set_margin_end(box, 18);
    w->heading = wrapped_label();
    w->reason = wrapped_label();
    w->warning = wrapped_label();
    w->instruction = wrapped_label();
    w->entry = gtk_password_entry_new();
    gtk_password_entry_set_show_peek_icon(GTK_PASSWORD_ENTRY(w->entry), FALSE);
    g_object_set(w->entry, "placeholder-text", "Device passcode", NULL);
    g_signal_connect(w->entry, "activate", G_CALLBACK(on_entry_activate), w);
    gtk_box_append(GTK_BOX(box), w->heading);
    gtk_box_append(GTK_BOX(box), w->reason);
    gtk_box_append(GTK_BOX(box), w->warning);
    gtk_box_append(GTK_BOX(box), w->instruction);
    gtk_box_append(GTK_BOX(box), w->entry);

    GtkWidget *simulated = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    w->match = button("Simulate a matching touch", G_CALLBACK(on_match), w, simulated);
    w->no_match = button("Simulate a non-matching touch", G_CALLBACK(on_no_match), w, simulated);
    gtk_box_append(GTK_BOX(box), simulated);

    GtkWidget *row = gtk_box_new(GTK_ORIENTATION_HORIZONTAL, 6);
    gtk_widget_set_halign(row, GTK_ALIGN_END);
    w->fallback = button("", G_CALLBACK(on_fallback), w, row);
    w->retry = button("Try Again", G_CALLBACK(on_retry), w, row);
    w->cancel = button("Cancel", G_CALLBACK(on_cancel), w, row);
    w->ok = button("OK", G_CALLBACK(on_ok), w, row);
    gtk_box_append(GTK_BOX(box), row);
    gtk_window_set_child(GTK_WINDOW(w->window), box);
    return w;
}

// The app's strings are shown as text, never as markup: no app can restyle the prompt.
static void set_bold(GtkWidget *label, const char *text) {
    char *escaped = g_markup_escape_text(text, -1);
    char *markup = g_strdup_printf("<b>%s</b>", escaped);
    gtk_label_set_markup(GTK_LABEL(label), markup);
    g_free(markup);
    g_free(escaped);
}

int la_prompt_init(void) {
    if (!gtk_init_check()) return 0;
    windows = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, NULL);
    loop = g_main_loop_new(NULL, FALSE);
    return 1;
}

void la_prompt_set_handler(la_prompt_handler h, void *context) {
    handler = h;
    handler_context = context;
}

void la_prompt_show(unsigned long long prompt, const la_prompt_screen *s) {
    guint64 key = prompt;
    prompt_window *w = g_hash_table_lookup(windows, &key);
    gboolean first = w == NULL;
    if (first) {
        w = new_window(prompt);
        g_hash_table_insert(windows, &w->prompt, w);
    }
    gtk_window_set_title(GTK_WINDOW(w->window), s->administration ? "laenclaved — allow administration" : "laenclaved — confirm it is you");
    char *heading = g_strdup_printf("%s %s", s->app, s->heading);
    set_bold(w->heading, heading);
    g_free(heading);
    gtk_label_set_text(GTK_LABEL(w->reason), s->reason);
    if (s->warning) {
        char *escaped = g_markup_escape_text(s->warning, -1);
        char *markup = g_strdup_printf("<span foreground=\"#c01c28\" weight=\"bold\">%s</span>", escaped);
        gtk_label_set_markup(GTK_LABEL(w->warning), markup);
        g_free(markup);
        g_free(escaped);
    }
    gtk_widget_set_visible(w->warning, s->warning != NULL);
    gtk_label_set_text(GTK_LABEL(w->instruction), s->instruction);
    gtk_widget_set_visible(w->entry, s->passcode_entry);
    gtk_widget_set_visible(w->ok, s->passcode_entry);
    gtk_button_set_label(GTK_BUTTON(w->cancel), s->cancel_title);
    gtk_widget_set_visible(w->fallback, s->fallback_title != NULL);
    if (s->fallback_title) gtk_button_set_label(GTK_BUTTON(w->fallback), s->fallback_title);
    gtk_widget_set_visible(w->retry, s->retry_offered);
    gtk_widget_set_visible(gtk_widget_get_parent(w->match), s->simulated_touches);
    if (first) gtk_window_present(GTK_WINDOW(w->window));
    if (s->passcode_entry) gtk_widget_grab_focus(w->entry);
}

static void destroy(prompt_window *w) {
    w->closing = TRUE;
    gtk_window_destroy(GTK_WINDOW(w->window));
}

void la_prompt_close(unsigned long long prompt) {
    guint64 key = prompt;
    prompt_window *w = g_hash_table_lookup(windows, &key);
    if (!w) return;
    g_hash_table_remove(windows, &key);
    destroy(w);
}

void la_prompt_close_all(void) {
    GList *all = g_hash_table_get_values(windows);
    g_hash_table_steal_all(windows);
    for (GList *l = all; l; l = l->next) destroy(l->data);
    g_list_free(all);
}

typedef struct {
    void (*body)(void *);
    void *data;
} main_call;

static gboolean run_call(gpointer data) {
    main_call *call = data;
    call->body(call->data);
    g_free(call);
    return G_SOURCE_REMOVE;
}

// Always queued (never run on the caller's thread, as g_main_context_invoke may before the loop runs).
void la_prompt_call_on_main(void (*body)(void *), void *data) {
    main_call *call = g_new(main_call, 1);
    call->body = body;
    call->data = data;
    g_idle_add_full(G_PRIORITY_DEFAULT, run_call, call, NULL);
}

void la_prompt_run(void) { g_main_loop_run(loop); }
void la_prompt_quit(void) { g_main_loop_quit(loop); }
