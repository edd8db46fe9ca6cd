// On Apple platforms LocalAuthentication's headers import Security's (LAContext takes a
// SecAccessControl), so `import LocalAuthentication` alone makes SecItem…, SecAccessControl and the
// kSec constants visible. The same here.
@_exported import Security
