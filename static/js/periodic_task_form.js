// django-celery-beat's periodic-task form: show the chosen crontab in words under the field (its own
// template does this in an inline script, which karpweb's Content-Security-Policy does not run).
(function ($) {
  const readableCrontabs = JSON.parse(document.getElementById("readable-crontabs").textContent);
  const originalHelp = JSON.parse(document.getElementById("crontab-help").textContent);
  $(".field-crontab_translation").hide();
  $(".field-crontab").change(function () {
    const help = $(".field-crontab .help").empty();
    help.append(document.createTextNode(originalHelp), $("<br>"),
                document.createTextNode("Translation: " + readableCrontabs[$("#id_crontab").val()]));
  });
})(django.jQuery);
