// Progressive enhancement only: every form and link works without this file.
// - [data-copy]: copy the text of the element with that id to the clipboard
// - form[data-confirm]: ask before submitting
// - [data-live-src]: refresh the log table while the page is open (a small HTML fragment)
(function () {
  'use strict';

  document.querySelectorAll('[data-copy]').forEach(function (button) {
    var target = document.getElementById(button.getAttribute('data-copy'));
    if (!target || !navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener('click', function () {
      navigator.clipboard.writeText(target.textContent.trim()).then(
        function () {
          button.textContent = 'Copied';
          setTimeout(function () {
            button.textContent = 'Copy';
          }, 2000);
        },
        function () {
          button.textContent = 'Select and copy';
        },
      );
    });
  });

  document.querySelectorAll('form[data-confirm]').forEach(function (form) {
    form.addEventListener('submit', function (event) {
      if (!window.confirm(form.getAttribute('data-confirm'))) event.preventDefault();
    });
  });

  var live = document.querySelector('[data-live-src]');
  var period = Number(document.body.getAttribute('data-live-ms')) || 5000;
  if (live) {
    var status = document.querySelector('[data-live-status]');
    var busy = false;
    var refresh = function () {
      if (busy || document.hidden) return;
      busy = true;
      fetch(live.getAttribute('data-live-src'), { credentials: 'same-origin', headers: { Accept: 'text/html' } })
        .then(function (res) {
          if (!res.ok) throw new Error('status ' + res.status);
          return res.text();
        })
        .then(function (text) {
          // our own server-rendered, escaped fragment from the same origin
          if (live.innerHTML !== text) live.innerHTML = text;
          if (status)
            status.textContent = 'Refreshes while this page is open. Updated ' + new Date().toLocaleTimeString() + '.';
        })
        .catch(function () {
          if (status) status.textContent = 'Live refresh paused (the server did not answer); reload to retry.';
        })
        .then(function () {
          busy = false;
        });
    };
    setInterval(refresh, period);
    document.addEventListener('visibilitychange', refresh);
  }
})();
