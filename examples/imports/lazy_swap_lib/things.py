class AutoThing:
    name = "lazy AutoThing"
