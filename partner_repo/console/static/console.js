// The console's one script: a forget form's button is enabled only once the core id is typed exactly. The
// server checks the confirmation again (this only saves a round trip); everything works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    const typed = form.querySelector("input[name=confirm]");
    const button = form.querySelector("button[type=submit]");
    const sync = () => {
      button.disabled = typed.value.trim() !== form.dataset.confirm;
    };
    typed.addEventListener("input", sync);
    sync();
  }
});
